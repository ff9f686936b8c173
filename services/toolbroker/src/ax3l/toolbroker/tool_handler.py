"""Domain dispatch for the tool channel (the spec's ToolHandler): one raw request in, one reply.

Order per request: the envelope is read and the method looked up (no effects), then
``tool_request_received`` is committed together with ``tool_execution_started`` or, for a
malformed envelope (``invalid_request``) or an unknown method (``unknown_method``),
``tool_execution_failed``. If that write fails nothing else happens and the reply is
``handler_error``. Only then does the method's handler run. A handler result is logged as
``tool_execution_completed`` (a rejection together with its ``proposal_rejected_*`` event); a
protocol failure or crash of the handler as ``tool_execution_failed``. Every reply has the
request's envelope shape with sender ``ax3l``; ``handle`` never raises.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import (
    ToolExecutionCompleted,
    ToolExecutionFailed,
    ToolExecutionStarted,
    ToolRequestReceived,
)
from ax3l.shared.metrics import TOOL_REQUEST_SECONDS, TOOL_REQUESTS
from ax3l.shared.tool_channel import BROKER_SENDER, MCP_SENDER, PROTOCOL_VERSION, TOOL_TARGET
from ax3l.shared.wire import ToolEnvelope, printable
from ax3l.toolbroker.handlers import MethodHandler
from ax3l.toolbroker.results import Accepted, HandlerResult, ProtocolFailure, Rejected
from ax3l.toolbroker.status import BrokerStatus
from ax3l.toolbroker.submission import RequestContext
from ax3l.toolbroker.value_rules import clean_name, shorten

logger = logging.getLogger(__name__)

ENVELOPE_FIELDS = tuple(ToolEnvelope.model_fields)  # the contract's five keys, in order
_NO_HANDLER = ProtocolFailure("unknown_method", "no handler for this method")
LOGGED_TEXT_CHARS = 4096
SOURCE_NAME = "ToolHandler"


def describe_request(raw: bytes) -> ToolRequestReceived:
    """The ``tool_request_received`` content: size and (the start of) the text."""
    text = raw[: LOGGED_TEXT_CHARS * 4].decode("utf-8", "replace")
    truncated = len(text) > LOGGED_TEXT_CHARS or len(raw) > LOGGED_TEXT_CHARS * 4
    return ToolRequestReceived(
        size_bytes=len(raw), text=text[:LOGGED_TEXT_CHARS], truncated=truncated
    )


class Request:
    """What could be read from a raw message, enough to address the reply."""

    def __init__(self) -> None:
        self.sender: str | None = None
        self.method: str | None = None
        self.payload: dict[str, Any] = {}


def parse_request(raw: bytes, max_bytes: int, request: Request, frames: int = 1) -> None:
    """Fill ``request`` from ``raw``; raises ``invalid_request`` for a malformed envelope."""
    document = _json_object(raw, max_bytes, frames)
    request.sender = clean_name(document.get("sender"))
    request.method = clean_name(document.get("method"))
    problems = _envelope_problems(document)
    if problems:
        raise ProtocolFailure("invalid_request", "malformed envelope: " + "; ".join(problems))
    request.payload = document["payload"]


def _json_object(raw: bytes, max_bytes: int, frames: int) -> dict[str, Any]:
    """The message as a JSON object; raises ``invalid_request`` when it is none."""
    if frames != 1:
        raise ProtocolFailure(
            "invalid_request", f"a request is one message frame; this one had {frames}"
        )
    if len(raw) > max_bytes:
        raise ProtocolFailure(
            "invalid_request", f"the message has {len(raw)} bytes; the limit is {max_bytes}"
        )
    try:
        document = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ProtocolFailure("invalid_request", "the message is not UTF-8 text") from None
    except RecursionError:
        raise ProtocolFailure("invalid_request", "the message is nested too deeply") from None
    except ValueError as exc:
        raise ProtocolFailure(
            "invalid_request", f"the message is not JSON: {shorten(str(exc), 200)}"
        ) from None
    if not isinstance(document, dict):
        raise ProtocolFailure("invalid_request", "the message is not a JSON object")
    return document


def _envelope_problems(document: dict[str, Any]) -> list[str]:
    """What is wrong with the envelope's fields, in the order the reply lists them."""
    problems = []
    missing = [name for name in ENVELOPE_FIELDS if name not in document]
    extra = sorted(printable(name, 40) for name in document if name not in ENVELOPE_FIELDS)
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if extra:
        problems.append(f"unexpected {', '.join(extra)}")
    version = document.get("protocol_version")
    if "protocol_version" in document and (type(version) is not int or version != 1):
        problems.append(f"protocol_version must be the integer 1, not {printable(version)}")
    for name in ("sender", "target", "method"):
        if name in document and clean_name(document[name]) is None:
            problems.append(f"{name} must be a non-empty string of at most 100 characters")
    target = document.get("target")
    if isinstance(target, str) and clean_name(target) and target != TOOL_TARGET:
        problems.append(f"target must be {TOOL_TARGET!r}, not {printable(target)}")
    if "payload" in document and not isinstance(document["payload"], dict):
        problems.append("payload must be a JSON object")
    return problems


def reply_bytes(request: Request, payload: Mapping[str, Any]) -> bytes:
    """The reply envelope (ASCII JSON, so no caller-supplied text can break the encoding)."""
    envelope = {
        "protocol_version": PROTOCOL_VERSION,
        "sender": BROKER_SENDER,
        "target": request.sender or MCP_SENDER,
        "method": request.method or "error",
        "payload": payload,
    }
    return json.dumps(envelope, allow_nan=False).encode("ascii")


@dataclass(frozen=True)
class _Handled:
    """A request its handler answered: what each of its outcome events is stamped with."""

    method: str | None
    process_id: str
    received: int
    source_name: str
    parameter: str | None

    def fields(self, **override: Any) -> dict[str, Any]:
        return {
            "process_id": self.process_id,
            "parent_event_id": self.received,
            "source_name": self.source_name,
            "parameter": self.parameter,
            **override,
        }


class ToolHandler:
    """Dispatches tool-channel requests to their method handlers, one at a time."""

    def __init__(
        self,
        log: EventLog,
        handlers: Mapping[str, MethodHandler],
        status: BrokerStatus,
        max_bytes: int,
    ):
        self.log = log
        self.handlers = dict(handlers)
        self.status = status
        self.max_bytes = max_bytes

    async def handle(self, raw: bytes, frames: int = 1) -> bytes:
        """Answer one raw request (``frames`` body frames, joined in ``raw``); never raises."""
        request = Request()
        started = time.perf_counter()
        try:
            payload, outcome = await self._handle(raw, request, frames)
        except Exception:
            logger.exception("tool request crashed outside its handler")
            failure = ProtocolFailure("handler_error", "the broker failed to handle the request")
            payload, outcome = failure.payload(), "handler_error"
        self.status.record(outcome)
        TOOL_REQUESTS.labels(outcome).inc()
        TOOL_REQUEST_SECONDS.observe(time.perf_counter() - started)
        try:
            return reply_bytes(request, payload)
        except (TypeError, ValueError):
            logger.exception("reply could not be encoded")
            failure = ProtocolFailure("handler_error", "the reply could not be encoded")
            return reply_bytes(request, failure.payload())

    async def _handle(
        self, raw: bytes, request: Request, frames: int
    ) -> tuple[dict[str, Any], str]:
        """Parse, log the receipt, dispatch, log the outcome; the reply payload and outcome."""
        process_id = str(uuid.uuid4())
        # Reading the envelope has no effect, so it may come first; what is logged (and
        # committed before any handler runs) is received, then started or failed.
        handler, refused = self._parse(raw, request, frames)
        parameter = _parameter_of(request.payload)
        try:
            received = await self._log_receipt(
                raw, request, process_id, parameter, handler, refused
            )
        except Exception as exc:
            logger.error("tool request not handled: logging it failed: %s", exc)
            unlogged = ProtocolFailure(
                "handler_error",
                f"the request could not be logged, so it was not handled ({_public_error(exc)})",
            )
            return unlogged.payload(), unlogged.code
        if refused is not None or handler is None:
            failure = refused or _NO_HANDLER
            return failure.payload(), failure.code

        result = await self._dispatch(handler, request.payload, process_id, received)
        if isinstance(result, ProtocolFailure):
            await self._log_failure(result, process_id, received, request, result.log_level)
            return result.payload(), result.outcome
        call = _Handled(request.method, process_id, received, handler.source_name, parameter)
        if isinstance(result, Accepted):
            await self._log_accepted(result, call)
            return result.payload(), result.outcome
        not_logged = await self._log_rejected(result, call)
        if not_logged is not None:
            return not_logged.payload(), not_logged.code
        return result.payload(), result.outcome

    def _parse(
        self, raw: bytes, request: Request, frames: int
    ) -> tuple[MethodHandler | None, ProtocolFailure | None]:
        """Read the envelope into ``request`` and find its method's handler, or why not."""
        try:
            parse_request(raw, self.max_bytes, request, frames)
            assert request.method is not None
            handler = self.handlers.get(request.method)
            if handler is None:
                raise ProtocolFailure(
                    "unknown_method",
                    f"unknown method {printable(request.method)}; the methods are"
                    f" {', '.join(sorted(self.handlers))}",
                )
        except ProtocolFailure as failure:
            return None, failure
        return handler, None

    async def _log_receipt(
        self,
        raw: bytes,
        request: Request,
        process_id: str,
        parameter: str | None,
        handler: MethodHandler | None,
        refused: ProtocolFailure | None,
    ) -> int:
        """Commit ``tool_request_received`` with ``tool_execution_started`` (or ``_failed`` for
        a refused request); the received event's id."""
        async with self.log.db.transaction("logging a tool request") as cur:
            received = await self.log.write(
                cur,
                describe_request(raw),
                process_id=process_id,
                source_name=SOURCE_NAME,
                parameter=parameter,
            )
            if refused is not None or handler is None:
                await self.log.write(
                    cur,
                    ToolExecutionFailed(
                        method=request.method, **(refused or _NO_HANDLER).payload()
                    ),
                    level="WARNING",
                    process_id=process_id,
                    parent_event_id=received,
                    source_name=SOURCE_NAME,
                    parameter=parameter,
                )
            else:
                await self.log.write(
                    cur,
                    ToolExecutionStarted(method=request.method, parameter=parameter),
                    process_id=process_id,
                    parent_event_id=received,
                    source_name=handler.source_name,
                    parameter=parameter,
                )
        return received

    async def _dispatch(
        self, handler: MethodHandler, payload: dict[str, Any], process_id: str, received: int
    ) -> HandlerResult | ProtocolFailure:
        """The handler's result, or the protocol failure it raised (a crash is one too)."""
        try:
            return await handler(payload, RequestContext(process_id, received, handler.source_name))
        except ProtocolFailure as failure:
            return failure
        except Exception as exc:
            logger.exception("%s crashed", handler.source_name)
            return ProtocolFailure(
                "handler_error", f"{handler.source_name} failed: {_public_error(exc)}"
            )

    async def _log_accepted(self, result: Accepted, call: _Handled) -> None:
        try:
            await self.log.log(
                ToolExecutionCompleted(
                    method=call.method, status=result.payload()["status"], run_id=result.run_id
                ),
                **call.fields(),
            )
        except Exception as exc:
            # The run and its proposal events are durable: still answer with the run.
            logger.error("could not log tool_execution_completed: %s", exc)

    async def _log_rejected(self, result: Rejected, call: _Handled) -> ProtocolFailure | None:
        """Log the rejection with ``tool_execution_completed``; the failure to answer with
        instead when that could not be logged."""
        try:
            async with self.log.db.transaction("logging a rejected proposal") as cur:
                await self.log.write(
                    cur,
                    result.content,
                    **call.fields(parameter=result.parameter),
                )
                await self.log.write(
                    cur,
                    ToolExecutionCompleted(
                        method=call.method, status=result.payload()["status"], code=result.code
                    ),
                    **call.fields(),
                )
        except Exception as exc:
            logger.error("could not log the rejection: %s", exc)
            return ProtocolFailure(
                "handler_error",
                f"the proposal was rejected ({result.code}) but the rejection could not be"
                f" logged ({_public_error(exc)})",
            )
        return None

    async def _log_failure(
        self,
        failure: ProtocolFailure,
        process_id: str,
        received: int,
        request: Request,
        level: str,
    ) -> None:
        try:
            await self.log.log(
                ToolExecutionFailed(
                    method=request.method, **failure.payload(), **failure.event_details()
                ),
                level=level,
                process_id=process_id,
                parent_event_id=received,
                source_name=SOURCE_NAME,
                parameter=_parameter_of(request.payload),
            )
        except Exception as exc:
            logger.error("could not log tool_execution_failed: %s", exc)


def _parameter_of(payload: Mapping[str, Any]) -> str | None:
    for field in ("parameter", "pair"):
        name = clean_name(payload.get(field))
        if name is not None:
            return name
    return None


def _public_error(exc: BaseException) -> str:
    # Domain errors carry messages written for operators (no secrets); anything else is an
    # internal detail the model should not read.
    if isinstance(exc, DatabaseError):
        return shorten(str(exc), 300)
    return type(exc).__name__
