"""Hostile messages on the control socket: an error reply each, the server and its run unharmed.

One server and one long run serve the whole module; after every message the run must still
be running, still advancing, and its row untouched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import pytest
import zmq

from ax3l.shared.snakelab_client import ping
from ax3l.shared.wire import ControlError
from ax3l.testing.plugin import wait_until
from ax3l.testing.snakelab_process import (
    ScratchDatabase,
    SnakeLabProcess,
    scratch_snakelab_database,
)
from snakelab.envelope import MAX_NESTING
from snakelab.server import TRANSPORT_LIMIT_FACTOR

LIMIT = 262144  # the server's default --max-message-bytes


def envelope(method: str = "health", payload: Any = None, **changes: Any) -> dict[str, Any]:
    document = {
        "protocol_version": 1,
        "request_id": "hostile-1",
        "method": method,
        "payload": {} if payload is None else payload,
    }
    document.update(changes)
    return document


def encoded(document: Any) -> bytes:
    return json.dumps(document).encode()


def nested(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def exchange(endpoint: str, frames: list[bytes], timeout: float = 5.0) -> bytes | None:
    """Send one (possibly multipart) message on a fresh REQ socket; the reply, or None."""
    context: zmq.Context[Any] = zmq.Context.instance()
    sock = context.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(endpoint)
        sock.send_multipart(frames)
        if not sock.poll(int(timeout * 1000)):
            return None
        return sock.recv()
    finally:
        sock.close(linger=0)


@dataclass
class Lab:
    server: SnakeLabProcess
    database: ScratchDatabase
    run_id: str

    def call(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        raw = exchange(self.server.endpoint, [encoded(envelope(method, payload))])
        assert raw is not None, "the server did not answer"
        reply = json.loads(raw)
        assert reply["status"] == "ok", reply
        return dict(reply["payload"])

    def run_status(self) -> dict[str, Any]:
        return self.call("simulation.status", {"run_id": self.run_id})

    def row(self) -> tuple[Any, ...]:
        with closing(self.database.connect()) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT status, error_message FROM simulation_runs WHERE run_id = %s",
                (self.run_id,),
            )
            return tuple(cur.fetchone())


@pytest.fixture(scope="module")
def lab(db_env: dict[str, str]) -> Iterator[Lab]:
    with (
        scratch_snakelab_database(db_env) as database,
        SnakeLabProcess(database.env(), trainer="surrogate", seconds=600) as server,
    ):
        raw = exchange(server.endpoint, [encoded(envelope("simulation.submit", {"config": {}}))])
        assert raw is not None
        lab = Lab(server, database, json.loads(raw)["payload"]["run_id"])
        wait_until(lambda: lab.run_status()["completed_epochs"] > 0, what="the run to train")
        yield lab
        assert lab.call("simulation.cancel", {"run_id": lab.run_id})["state"] == "cancelling"
        wait_until(lambda: lab.run_status()["state"] == "cancelled", what="the run to cancel")
        assert "Traceback" not in server.log_tail(400)


def assert_unharmed(lab: Lab, epochs_before: int) -> None:
    """The process lives, answers health, and the run is running and still advancing."""
    assert lab.server.process is not None and lab.server.process.poll() is None
    assert ping(lab.server.endpoint, timeout=3.0)
    wait_until(
        lambda: lab.run_status()["completed_epochs"] > epochs_before,
        what="the run to go on training",
    )
    status = lab.run_status()
    assert (status["state"], status.get("error")) == ("running", None)
    assert lab.row() == ("running", None)


def refused(lab: Lab, frames: list[bytes]) -> ControlError:
    """The error reply to ``frames``, checked against the contract's shape."""
    before = lab.run_status()["completed_epochs"]
    raw = exchange(lab.server.endpoint, frames)
    assert raw is not None, "no reply"
    reply = ControlError.model_validate(json.loads(raw))
    assert_unharmed(lab, before)
    return reply


DEEP_ARRAY = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECT = b'{"a":' * 40_000 + b"1" + b"}" * 40_000


@pytest.mark.parametrize(
    ("frames", "echoed"),
    [
        pytest.param([DEEP_ARRAY], None, id="arrays-100000-deep"),
        pytest.param([DEEP_OBJECT], None, id="objects-40000-deep"),
        pytest.param([encoded(envelope(payload=nested(MAX_NESTING)))], "hostile-1", id="payload"),
        pytest.param(
            [encoded(envelope("simulation.submit", {"config": nested(900)}))],
            "hostile-1",
            id="config-900-deep",
        ),
    ],
)
def test_deep_nesting_is_refused(lab: Lab, frames: list[bytes], echoed: str | None) -> None:
    """Nesting beyond the parser (RecursionError) or beyond MAX_NESTING is invalid_request."""
    reply = refused(lab, frames)
    assert (reply.error.code, reply.request_id) == ("invalid_request", echoed)
    assert "nested too deeply" in reply.error.message


def test_nesting_a_config_needs_is_accepted(lab: Lab) -> None:
    """The depth bound leaves room for real requests: a nested config is validated as usual."""
    reply = refused(lab, [encoded(envelope("simulation.submit", {"config": {"game": nested(3)}}))])
    assert reply.error.code == "invalid_config"


@pytest.mark.parametrize(
    "frames",
    [
        pytest.param([b'{"protocol_version": ' + b"9" * 5000 + b"}"], id="version-5000-digits"),
        pytest.param([encoded(envelope(request_id=10**99))], id="id-100-digits"),
        pytest.param(
            [
                b'{"protocol_version":1,"request_id":"r","method":"health","payload":{"x":-'
                + b"1" * 200_000
                + b"}}"
            ],
            id="payload-200000-digits",
        ),
    ],
)
def test_huge_integers_are_refused(lab: Lab, frames: list[bytes]) -> None:
    """Integers beyond any real value (or Python's conversion limit) are invalid_request."""
    assert refused(lab, frames).error.code == "invalid_request"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"epochs": 10**99}, "$.epochs: "),
        ({"seed": 1e308}, "$.seed: 1000000000000000010979063629440455417404923096773118463368"),
        ({"epochs": float("inf")}, "$.epochs: inf is not a finite number"),
        ({"training": {"gamma": -1e999}}, "$.training.gamma: -inf is not a finite number"),
    ],
)
def test_huge_numbers_in_a_config_are_invalid_configs(
    lab: Lab, config: dict[str, Any], message: str
) -> None:
    """Numbers too large for any field are named in an invalid_config reply."""
    raw = json.dumps(envelope("simulation.submit", {"config": config})).encode()
    reply = refused(lab, [raw])
    assert (reply.error.code, reply.request_id) == ("invalid_config", "hostile-1")
    assert reply.error.message.startswith(message), reply.error.message


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"\xff\xfe{}", id="not-utf8"),
        pytest.param(b'{"protocol_version":1,"request_id":"\xc0\xaf"}', id="overlong"),
        pytest.param(b'{"protocol_version":1,"request_id":"\xe2\x82', id="truncated"),
        pytest.param(b'{"a":"\xed\xa0\x80"}', id="encoded-surrogate"),
    ],
)
def test_invalid_utf8_is_refused(lab: Lab, raw: bytes) -> None:
    """Bytes that are not UTF-8 get invalid_request with a null request_id."""
    reply = refused(lab, [raw])
    assert (reply.error.code, reply.request_id) == ("invalid_request", None)
    assert "not valid UTF-8" in reply.error.message


def test_escaped_lone_surrogates_are_refused(lab: Lab) -> None:
    """A JSON escape of half a surrogate pair is no text: invalid_request, the id echoed."""
    raw = b'{"protocol_version":1,"request_id":"id-\\ud800","method":"\\udfff","payload":{}}'
    reply = refused(lab, [raw])
    assert (reply.error.code, reply.request_id) == ("invalid_request", "id-\ud800")


def test_a_message_over_the_limit_is_refused_naming_the_limit(lab: Lab) -> None:
    """One byte over --max-message-bytes is refused before it is parsed."""
    raw = encoded(envelope())
    reply = refused(lab, [raw + b" " * (LIMIT + 1 - len(raw))])
    assert reply.error.code == "invalid_request"
    assert str(LIMIT) in reply.error.message


def test_many_frames_are_refused(lab: Lab) -> None:
    """A multipart message of many frames is not one request."""
    reply = refused(lab, [encoded(envelope())] * 200)
    assert reply.error.code == "invalid_request"
    assert "one frame, got 200" in reply.error.message


def test_a_frame_over_the_transport_limit_is_dropped_and_the_server_goes_on(lab: Lab) -> None:
    """ZeroMQ drops a frame above 16 x the limit (memory stays bounded); nothing else changes."""
    before = lab.run_status()["completed_epochs"]
    raw = exchange(lab.server.endpoint, [b" " * (LIMIT * TRANSPORT_LIMIT_FACTOR + 1)], 2.0)
    assert raw is None
    assert_unharmed(lab, before)
