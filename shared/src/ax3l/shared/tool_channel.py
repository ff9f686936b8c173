"""The tool channel between an MCP child and Ax3l's toolbroker (ZeroMQ, JSON envelopes).

The envelope ``{"protocol_version": 1, "sender", "target", "method", "payload"}`` is
``wire.ToolEnvelope`` (``encode``/``decode`` here), and ``ZMQClient`` sends one request and
waits for one reply on a fresh REQ socket (``ax3l.shared.zmq_request``). Send and receive are
bounded by ``timeout`` (15 s, ``AX3L_ZMQ_TIMEOUT``). A request that timed out may already have
been processed, so nothing here ever resends; the caller gets ``ToolChannelTimeout``.

Endpoint resolution (``client_endpoint`` / ``listen_endpoint``): ``AX3L_ZMQ_ENDPOINT``, else
the zmq binding in Ax3l's config file (``AX3L_CONFIG_FILE``, default
``/opt/prod/ax3l/conf/ax3l.json``), else ``tcp://127.0.0.1:61970``. The config file may
give the binding as ``{"zmq": "tcp://..."}``, ``{"zmq": {"bind": "tcp://..."}}`` (also
``endpoint``/``address``/``url``) or the same under ``"network"``/``"networks"``; a
missing or unreadable file is simply skipped. A wildcard bind address (``*``, ``0.0.0.0``)
is reached by clients on 127.0.0.1.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import zmq
import zmq.asyncio
from pydantic import ValidationError

from ax3l.shared.settings import ToolbrokerSettings, ZmqSettings
from ax3l.shared.wire import ToolEnvelope
from ax3l.shared.zmq_request import EndpointRefused, request_reply

logger = logging.getLogger(__name__)

PROTOCOL_VERSION: Literal[1] = 1
DEFAULT_ENDPOINT = "tcp://127.0.0.1:61970"
MCP_SENDER = "mcp-snakelab"
BROKER_SENDER = "ax3l"
TOOL_TARGET = "snakelab"
MAX_REPLY_BYTES = 16 * 1024 * 1024


class ToolChannelError(RuntimeError):
    """The tool channel failed (bad endpoint, socket error, malformed reply)."""


class ToolChannelTimeout(ToolChannelError):
    """No reply within the timeout; the request may or may not have been processed."""


class ToolChannelProtocolError(ToolChannelError):
    """The other side's message broke the envelope contract."""


def request_envelope(method: str, payload: dict[str, Any]) -> ToolEnvelope:
    """A request from the MCP child to the SnakeLab tools."""
    return ToolEnvelope(
        protocol_version=PROTOCOL_VERSION,
        sender=MCP_SENDER,
        target=TOOL_TARGET,
        method=method,
        payload=payload,
    )


def encode(envelope: ToolEnvelope) -> bytes:
    """Strict JSON (no NaN or infinities) in UTF-8, the keys in the contract's order."""
    try:
        text = json.dumps(envelope.model_dump(), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ToolChannelProtocolError(
            f"cannot encode the {envelope.method} message: {exc}"
        ) from None
    return text.encode("utf-8")


def decode(raw: bytes) -> ToolEnvelope:
    """Parse and validate an envelope; raises ToolChannelProtocolError."""
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ToolChannelProtocolError(f"message is not UTF-8 JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ToolChannelProtocolError("message is not a JSON object")
    try:
        return ToolEnvelope.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg']}" for e in exc.errors()
        )
        raise ToolChannelProtocolError(f"malformed envelope: {problems}") from None


class ZMQClient:
    """Sends tool-channel requests; one fresh REQ socket per request, never retried."""

    def __init__(
        self,
        endpoint: str,
        timeout: float = 15.0,
        context: zmq.asyncio.Context | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ):
        self.endpoint = endpoint
        self.timeout = timeout
        self.max_reply_bytes = max_reply_bytes
        self._context = context or zmq.asyncio.Context.instance()

    async def exchange(self, raw: bytes) -> bytes:
        """One raw request and its raw reply (``request_reply``)."""
        try:
            return await request_reply(
                self._context,
                self.endpoint,
                raw,
                self.timeout,
                max_reply_bytes=self.max_reply_bytes,
            )
        except EndpointRefused as exc:
            raise ToolChannelError(
                f"cannot connect to the tool endpoint {self.endpoint!r}: {exc}"
            ) from None
        except TimeoutError:
            raise ToolChannelTimeout(
                f"Ax3l's tool endpoint {self.endpoint} did not answer within"
                f" {self.timeout:g} s; the request was not retried and may or may not"
                " have been processed"
            ) from None
        except zmq.ZMQError as exc:
            raise ToolChannelError(f"tool channel {self.endpoint}: {exc}") from None

    async def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Send an MCP-child request and return the validated reply's payload."""
        return decode(await self.exchange(encode(request_envelope(method, payload)))).payload


# -- endpoints --------------------------------------------------------------------------------

_ENDPOINT_KEYS = ("bind", "endpoint", "address", "url", "listen")


def _binding_in(node: Any) -> str | None:
    if isinstance(node, str) and node.strip():
        return node.strip()
    if isinstance(node, Mapping):
        for key in _ENDPOINT_KEYS:
            value = node.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def endpoint_from_config_file(path: str | Path) -> str | None:
    """The zmq binding in Ax3l's JSON config file, or None if absent or unreadable."""
    try:
        document = json.loads(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(document, Mapping):
        return None
    for parent in (document, document.get("network"), document.get("networks")):
        if isinstance(parent, Mapping):
            found = _binding_in(parent.get("zmq"))
            if found:
                return found
    return None


def connectable(endpoint: str) -> str:
    """A bind endpoint as a client reaches it: wildcard hosts become 127.0.0.1."""
    return re.sub(r"^tcp://(\*|0\.0\.0\.0)(?=:)", "tcp://127.0.0.1", endpoint)


def listen_endpoint(settings: ZmqSettings, override: str | None = None) -> str:
    """Where the broker binds: ``--zmq-endpoint``, env, config file, default."""
    if override:
        return override
    if "zmq_endpoint" in settings.model_fields_set:
        return settings.zmq_endpoint
    return endpoint_from_config_file(settings.config_file) or DEFAULT_ENDPOINT


def client_endpoint(settings: ZmqSettings) -> str:
    """Where an MCP child sends: env, config file (wildcards made local), default."""
    return connectable(listen_endpoint(settings))


def settle_does_not_fit(settings: ToolbrokerSettings) -> str | None:
    """Why the broker's longest answer to a submission would not fit in the tool channel's
    timeout, else None. An unanswered submit waits ``AX3L_SNAKELAB_TIMEOUT``, then up to
    ``AX3L_SUBMIT_SETTLE_WAIT`` for SnakeLab to answer again; a client (an MCP child, a seat)
    that gave up at ``AX3L_ZMQ_TIMEOUT`` before that would report a timeout for a proposal the
    broker accepted. Checked when the broker and the orchestrator start."""
    needed = settings.snakelab_timeout + settings.submit_settle_wait
    if needed <= settings.zmq_timeout:
        return None
    return (
        f"AX3L_SNAKELAB_TIMEOUT ({settings.snakelab_timeout:g} s) plus AX3L_SUBMIT_SETTLE_WAIT"
        f" ({settings.submit_settle_wait:g} s) is {needed:g} s, more than AX3L_ZMQ_TIMEOUT"
        f" ({settings.zmq_timeout:g} s): a submission the broker accepts after a late answer"
        " would reach its client as a timeout. Raise AX3L_ZMQ_TIMEOUT or lower the other two"
    )
