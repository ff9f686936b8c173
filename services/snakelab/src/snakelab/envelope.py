"""The control socket's envelope: reading one request message and writing one reply.

Every message gets exactly one JSON object back. How malformed input is classified:

* more than one frame, more than ``max_bytes``, invalid UTF-8, not JSON, a key repeated
  in an object, an integer of more than ``MAX_INTEGER_DIGITS`` digits, nesting too deep for
  the parser, or not a JSON object: ``invalid_request`` with ``request_id: null``;
* an object nested deeper than ``MAX_NESTING`` levels (a config needs 5):
  ``invalid_request``;
* ``protocol_version`` that is an integer other than 1: ``unsupported_protocol`` (a client
  speaking another version of the protocol); any other value, e.g. ``true``, ``"1"`` or
  ``1.0``, or a missing one: ``invalid_request`` (not a version number at all);
* a missing or extra key, an empty or non-string ``request_id``, a non-string ``method``, a
  payload that is not an object: ``invalid_request``.

``request_id`` is echoed whenever the message holds a usable one, even in error replies.
``NaN``/``Infinity`` tokens are read (Python's JSON reader accepts them) so that the error can
name the field; every field that holds one is refused later (the config's schema check
refuses non-finite numbers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ax3l.shared.wire import ControlRequest

ENVELOPE_KEYS = frozenset({"protocol_version", "request_id", "method", "payload"})
REQUEST_ID_MAX = 128
# Hostile-input bounds: far beyond any real request (a config is 5 levels deep and its
# largest integer, a seed, has 20 digits), far below what strains the parser or the replies.
MAX_NESTING = 32
MAX_INTEGER_DIGITS = 100


class RequestRefused(Exception):
    """A request that gets an error reply; ``code`` is one of the contract's error codes."""

    def __init__(self, code: str, message: str):
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")


@dataclass(frozen=True)
class Refusal:
    """A message that could not become a request, and the id to echo (if any)."""

    request_id: str | None
    error: RequestRefused


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"key {key!r} appears twice in one object")
        result[key] = value
    return result


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise ValueError(f"an integer of {digits} digits (at most {MAX_INTEGER_DIGITS})")
    return int(text)


def _nested_deeper_than(document: Any, limit: int) -> bool:
    """True when ``document`` has containers more than ``limit`` levels deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _usable_request_id(value: Any) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= REQUEST_ID_MAX:
        return value
    return None


def read_request(frames: list[bytes], max_bytes: int) -> ControlRequest | Refusal:
    """The request in ``frames`` (one ZeroMQ message), or why it is refused."""
    document = _json_object(frames, max_bytes)
    if isinstance(document, Refusal):
        return document
    request_id = _usable_request_id(document.get("request_id"))
    refused = _envelope_refusal(document, request_id)
    if refused is not None:
        return refused
    try:
        return ControlRequest.model_validate(document)
    except ValidationError as exc:  # the checks above should leave nothing for the model
        return _refuse(f"malformed request: {exc.errors()[0]['msg']}", request_id)


def _refuse(message: str, request_id: str | None = None, code: str = "invalid_request") -> Refusal:
    return Refusal(request_id, RequestRefused(code, message))


def _json_object(frames: list[bytes], max_bytes: int) -> dict[str, Any] | Refusal:
    """The message as a JSON object, or why it is none (no request id is known yet)."""
    if len(frames) != 1:
        return _refuse(f"a request is one frame, got {len(frames)}")
    raw = frames[0]
    if len(raw) > max_bytes:
        return _refuse(f"message of {len(raw)} bytes exceeds the limit of {max_bytes} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _refuse(f"message is not valid UTF-8 (byte {exc.start})")
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_int=_bounded_int)
    except ValueError as exc:  # JSONDecodeError, duplicate keys, endless integers
        return _refuse(f"message is not valid JSON: {exc}")
    except RecursionError:
        return _refuse(f"message is nested too deeply (at most {MAX_NESTING} levels)")
    if not isinstance(document, dict):
        return _refuse(f"message must be a JSON object, got {type(document).__name__}")
    return document


def _envelope_refusal(document: dict[str, Any], request_id: str | None) -> Refusal | None:
    """Why the envelope's keys refuse the request, or None (checked in the order replied)."""
    if _nested_deeper_than(document, MAX_NESTING):
        return _refuse(f"message is nested too deeply (at most {MAX_NESTING} levels)", request_id)
    if "protocol_version" not in document:
        return _refuse("missing key: protocol_version", request_id)
    version = document["protocol_version"]
    if type(version) is int and version != 1:
        return _refuse(
            f"protocol_version {version} is not supported; this server speaks 1",
            request_id,
            "unsupported_protocol",
        )
    if type(version) is not int:
        return _refuse(
            f"protocol_version must be the integer 1, got {json.dumps(version)}", request_id
        )
    keys = set(document)
    if extra := sorted(keys - ENVELOPE_KEYS):
        return _refuse(f"unexpected key(s): {', '.join(extra)}", request_id)
    if missing := sorted(ENVELOPE_KEYS - keys):
        return _refuse(f"missing key(s): {', '.join(missing)}", request_id)
    if request_id is None:
        return _refuse(f"request_id must be a non-empty string of at most {REQUEST_ID_MAX} chars")
    if not isinstance(document["method"], str):
        return _refuse("method must be a string", request_id)
    if not isinstance(document["payload"], dict):
        return _refuse("payload must be a JSON object", request_id)
    return None


def ok_reply(request_id: str, payload: dict[str, Any]) -> bytes:
    """The success reply for ``request_id``."""
    return _encode(
        {"protocol_version": 1, "request_id": request_id, "status": "ok", "payload": payload}
    )


def error_reply(request_id: str | None, error: RequestRefused) -> bytes:
    """The error reply for ``request_id`` (None when the request had no usable id)."""
    return _encode(
        {
            "protocol_version": 1,
            "request_id": request_id,
            "status": "error",
            "error": {"code": error.code, "message": error.message},
        }
    )


def _encode(reply: dict[str, Any]) -> bytes:
    # allow_nan=False: a reply must be JSON; status objects replace non-finite numbers first.
    return json.dumps(reply, allow_nan=False, separators=(",", ":")).encode("utf-8")
