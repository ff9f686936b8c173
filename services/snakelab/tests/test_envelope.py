"""Reading request messages: what becomes a request and how everything else is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from snakelab.envelope import Refusal, error_reply, ok_reply, read_request
from snakelab.envelope import RequestRefused as Refused

LIMIT = 4096


def message(**changes: Any) -> list[bytes]:
    document = {"protocol_version": 1, "request_id": "r", "method": "health", "payload": {}}
    document.update(changes)
    return [json.dumps(document).encode()]


def refusal(frames: list[bytes]) -> Refusal:
    result = read_request(frames, LIMIT)
    assert isinstance(result, Refusal), result
    return result


def test_a_well_formed_message_becomes_a_request() -> None:
    """Four keys with the right types give a ControlRequest."""
    request = read_request(message(method="simulation.status", payload={"run_id": "x"}), LIMIT)
    assert not isinstance(request, Refusal)
    assert (request.request_id, request.method, request.payload) == (
        "r",
        "simulation.status",
        {"run_id": "x"},
    )


def test_more_than_one_frame_is_refused() -> None:
    """A multipart message is not one request."""
    assert refusal([b"{}", b"{}"]).error.code == "invalid_request"


def test_the_size_limit_is_checked_before_parsing() -> None:
    """A message above the limit is refused, naming the limit."""
    found = refusal([b" " * (LIMIT + 1)])
    assert found.error.code == "invalid_request"
    assert str(LIMIT) in found.error.message


def test_a_repeated_key_is_refused_rather_than_silently_overwritten() -> None:
    """{"method": "a", "method": "b"} is ambiguous and refused."""
    raw = b'{"protocol_version":1,"request_id":"r","method":"a","method":"b","payload":{}}'
    assert "twice" in refusal([raw]).error.message


def test_an_unsupported_version_wins_over_an_unexpected_key() -> None:
    """A version-2 message with new keys is reported as unsupported_protocol, with its id."""
    found = refusal(message(protocol_version=2, sender="x"))
    assert (found.error.code, found.request_id) == ("unsupported_protocol", "r")


@pytest.mark.parametrize("version", [True, False, "1", 1.0, [1], {"v": 1}])
def test_a_version_that_is_not_an_integer_is_an_invalid_request(version: Any) -> None:
    """Only an integer can be a protocol version; anything else is malformed."""
    found = refusal(message(protocol_version=version))
    assert (found.error.code, found.request_id) == ("invalid_request", "r")


def test_an_overlong_request_id_is_not_echoed() -> None:
    """A request_id longer than 128 characters is refused and the reply's id is null."""
    found = refusal(message(request_id="x" * 129))
    assert (found.error.code, found.request_id) == ("invalid_request", None)


def test_replies_are_compact_json_objects() -> None:
    """ok_reply and error_reply produce the contract's shapes."""
    assert json.loads(ok_reply("r", {"a": 1})) == {
        "protocol_version": 1,
        "request_id": "r",
        "status": "ok",
        "payload": {"a": 1},
    }
    assert json.loads(error_reply(None, Refused("unknown_method", "m"))) == {
        "protocol_version": 1,
        "request_id": None,
        "status": "error",
        "error": {"code": "unknown_method", "message": "m"},
    }


def test_a_reply_never_contains_nan() -> None:
    """A non-finite number in a reply payload is a bug, caught before it reaches the wire."""
    with pytest.raises(ValueError, match="not JSON compliant"):
        ok_reply("r", {"loss": float("nan")})
