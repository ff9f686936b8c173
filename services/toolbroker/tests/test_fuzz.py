"""Hostile input: at least 10,000 malformed messages through the real socket."""

import asyncio
import json
import random

import pytest
import zmq
import zmq.asyncio
from broker_harness import SCHEMA, ScriptedSnakeLab, broker_on, write_golden

from ax3l.shared.wire import ToolEnvelope
from ax3l.toolbroker.turn_gate import NOTHING_DONE

MESSAGES = 10_000
WINDOW = 64


def hostile_messages(rng: random.Random, golden: dict, limit: int) -> list[bytes]:
    """Random bytes, wrong types, huge and deeply nested payloads, NaN, unknown methods, and
    submissions that can never be accepted (illegal, non-finite or unchanged values)."""
    # Illegal for every entry (wrong type, non-finite, out of every range, or not an integer
    # where integers are required), so no hostile submission can ever be a legal new run.
    illegal = [
        float("nan"),
        float("inf"),
        -float("inf"),
        True,
        False,
        None,
        "0.97",
        "",
        [],
        {},
        [0.97],
        {"value": 0.97},
        10**30,
        1e308,
        -1e-308,
        5e-324,
        0.5,
    ]
    # Legal for some entries: only ever paired with an illegal partner.
    maybe = [-1, 0, 2, 0.96, 64]
    epsilon = golden["epsilon"]
    names = ["gamma", "hidden_size", "epsilon_pair", "reward_pair", "seed", "", "x" * 101, "ü"]

    def envelope(**fields):
        base = {
            "protocol_version": 1,
            "sender": "mcp-snakelab",
            "target": "snakelab",
            "method": rng.choice(["submit_single_value", "submit_pair_values"]),
            "payload": {},
        }
        base.update(fields)
        for key in list(base):
            if rng.random() < 0.05:
                del base[key]
        return base

    def dumps(document) -> bytes:
        return json.dumps(document, allow_nan=True).encode("utf-8", "surrogatepass")

    def nested(depth: int):
        node: object = 0.97
        for _ in range(depth):
            node = [node] if rng.random() < 0.5 else {"a": node}
        return node

    makers = [
        lambda: rng.randbytes(rng.randint(0, 300)),
        lambda: rng.choice([b"", b"null", b"[]", b"42", b'"x"', b"{", b"\xff\xfe\xfd", b"NaN"]),
        lambda: dumps(envelope(protocol_version=rng.choice([True, "1", 1.0, 2, 0, None, [1]]))),
        lambda: dumps(envelope(sender=rng.choice([1, None, "", "s" * 200, ["a"]]))),
        lambda: dumps(envelope(target=rng.choice(["reports", "", 5, "SNAKELAB"]))),
        lambda: dumps(envelope(method=rng.choice(["", "simulation.submit", "x" * 300, 7, "ü"]))),
        lambda: dumps(envelope(payload=rng.choice([[], "p", 1, None, True]))),
        lambda: dumps(envelope(extra=rng.random())),
        lambda: dumps(
            envelope(
                method="submit_single_value",
                payload={"parameter": rng.choice(names), "value": rng.choice(illegal)},
            )
        ),
        lambda: dumps(
            envelope(
                method="submit_pair_values",
                payload=dict(
                    zip(
                        ("pair", *rng.sample(["value_1", "value_2"], 2)),
                        (rng.choice(names), rng.choice(illegal), rng.choice([*illegal, *maybe])),
                        strict=True,
                    )
                ),
            )
        ),
        lambda: dumps(
            envelope(
                method="submit_single_value",
                payload={"parameter": "gamma", "value": 0.95, "extra": 1},
            )
        ),
        # Unchanged proposals: legal values that equal the golden's (duplicates).
        lambda: dumps(
            envelope(
                method="submit_single_value",
                payload={"parameter": "gamma", "value": golden["training"]["gamma"]},
            )
        ),
        lambda: dumps(
            envelope(
                method="submit_pair_values",
                payload={
                    "pair": "epsilon_pair",
                    "value_1": epsilon["initial"],
                    "value_2": epsilon["decay"],
                },
            )
        ),
        lambda: dumps(
            envelope(payload={"parameter": "gamma", "value": nested(rng.randint(1, 50))})
        ),
        lambda: b'{"payload": ' + b"[" * rng.randint(900, 5000) + b"]" * 10 + b"}",
        lambda: dumps(envelope(payload={"blob": "x" * rng.randint(limit // 2, limit * 2)})),
        lambda: b'{"protocol_version": 1, "payload": {"value": 1' + b"0" * 5000 + b"}}",
        lambda: dumps(envelope(method="submit_single_value", payload={"parameter": "\ud800"})),
        lambda: dumps({rng.choice(["a", "b", "\x00"]): rng.random() for _ in range(20)}),
    ]
    return [rng.choice(makers)() for _ in range(MESSAGES)]


def check_reply(raw: bytes) -> str:
    """The reply is a strict envelope from ax3l with an error or a rejection; returns its kind
    (``refused_turn`` for a proposal outside the live turn)."""
    document = json.loads(raw, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
    envelope = ToolEnvelope.model_validate(document)
    assert envelope.sender == "ax3l"
    payload = envelope.payload
    if "error" in payload:
        assert set(payload) == {"error"}
        assert payload["error"]["code"] in ("invalid_request", "unknown_method", "handler_error")
        assert isinstance(payload["error"]["message"], str) and payload["error"]["message"]
        error = payload["error"]
        if error["code"] == "handler_error" and NOTHING_DONE in error["message"]:
            return "refused_turn"
        return str(payload["error"]["code"])
    assert payload["status"] == "rejected", payload
    assert payload["code"] in ("invalid_value", "duplicate_config")
    assert payload["prompt"] and payload["reason"]
    return str(payload["code"])


@pytest.mark.long  # minutes of the default suite's 15 (make test-long)
async def test_ten_thousand_hostile_messages_get_well_formed_errors(databases, lab):
    """Each hostile message gets a well-formed error or rejection; nothing reaches SnakeLab.
    A third of the messages meet gamma's turn, a third epsilon_pair's and a third
    reward_pair's, so the pair value rules are fuzzed too (not only the turn gate)."""
    golden = SCHEMA.with_values(SCHEMA.default_config(), {"seed": 77})
    await write_golden(databases, lab.insert_run(golden), golden)
    snakelab = ScriptedSnakeLab(
        reply={
            "status": "ok",
            "payload": {"run_id": "legal-run", "state": "queued", "queue_position": 0},
        }
    )
    async with broker_on(snakelab, databases, lab) as broker:
        limit = broker.broker.settings.zmq_max_message_bytes
        messages = hostile_messages(random.Random(20240229), golden, limit)
        turns = ("gamma", "epsilon_pair", "reward_pair")
        by_turn = {}
        for number, turn in enumerate(turns):
            await broker.open_turn(turn)
            by_turn[turn] = await _send_all(broker.endpoint, messages[number :: len(turns)])
        still_serving = await broker.single("gamma", 0.931)
    kinds = [kind for turn in turns for kind in by_turn[turn]]
    assert len(kinds) == MESSAGES
    for turn in turns:  # each turn's own value rules refused some of them
        assert "invalid_value" in by_turn[turn], turn
    assert "duplicate_config" in by_turn["epsilon_pair"]
    expected = {"invalid_request", "unknown_method", "invalid_value", "duplicate_config"}
    assert expected | {"refused_turn"} <= set(kinds)
    assert "handler_error" not in kinds
    # The one legal request afterwards reached SnakeLab; none of the hostile ones did.
    assert still_serving == {"status": "ok", "run_id": "legal-run"}
    assert [r["method"] for r in snakelab.received] == ["simulation.submit"]


async def _send_all(endpoint: str, messages: list[bytes]) -> list[str]:
    """Pipelined over one DEALER socket; the index frame pairs each reply with its request."""
    sock = zmq.asyncio.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    kinds: list[str | None] = [None] * len(messages)
    window = asyncio.Semaphore(WINDOW)

    async def send() -> None:
        for index, message in enumerate(messages):
            await window.acquire()
            await sock.send_multipart([str(index).encode(), b"", message])

    async def receive() -> None:
        for _ in messages:
            frames = await asyncio.wait_for(sock.recv_multipart(), 30)
            index, empty, reply = frames
            assert empty == b""
            kinds[int(index)] = check_reply(reply)
            window.release()

    try:
        await asyncio.gather(send(), receive())
    finally:
        sock.close(linger=0)
    assert all(kind is not None for kind in kinds)
    return [kind for kind in kinds if kind is not None]
