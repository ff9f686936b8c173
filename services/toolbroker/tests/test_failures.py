"""What the broker does when things go wrong: its own crashes, the database, SnakeLab, framing."""

import asyncio
import json

import zmq
import zmq.asyncio
from broker_harness import (
    SCHEMA,
    ScriptedSnakeLab,
    broker_on,
    envelope,
    event_names,
    events,
    send_raw,
    sql,
    write_golden,
)

import ax3l.shared.db.intents as intents
from ax3l.shared.db.database import Database


class Crashing:
    source_name = "CrashingHandler"

    async def __call__(self, payload, ctx):
        raise RuntimeError("boom with a secret-looking detail")


async def test_a_crashing_handler_gets_handler_error_and_the_listener_survives(
    databases, lab, golden, broker
):
    """A handler exception is answered handler_error, logged, and the next request is served."""
    real = broker.broker.handler.handlers["submit_single_value"]
    broker.broker.handler.handlers["submit_single_value"] = Crashing()
    reply = await broker.request("submit_single_value", {"parameter": "gamma", "value": 0.95})
    error = reply["payload"]["error"]
    assert error["code"] == "handler_error" and "RuntimeError" in error["message"]
    assert "secret-looking" not in error["message"]
    failed = events(databases, "tool_execution_failed")
    assert failed[-1]["log_level"] == "ERROR"
    broker.broker.handler.handlers["submit_single_value"] = real
    assert (await broker.single("gamma", 0.95))["status"] == "ok"


async def test_nothing_runs_when_the_request_cannot_be_logged(databases, lab, golden, broker):
    """If tool_request_received cannot be written, the reply is handler_error and no run starts."""
    before = lab.run_count()
    sql(databases, "RENAME TABLE event_messages TO event_messages_away")
    try:
        reply = await broker.request("submit_single_value", {"parameter": "gamma", "value": 0.94})
    finally:
        sql(databases, "RENAME TABLE event_messages_away TO event_messages")
    error = reply["payload"]["error"]
    assert error["code"] == "handler_error" and "could not be logged" in error["message"]
    assert lab.run_count() == before
    assert "tool_execution_started" not in event_names(databases)
    assert broker.broker.status.outcomes["handler_error"] == 1


async def test_snakelab_timeout_leaves_an_intent_that_is_adopted_later(databases, lab, golden):
    """A SnakeLab that stays silent past the settle wait leaves the state unknown, is not
    retried (only asked for its health), and its run is adopted as that turn's one proposal: a
    resubmission in the turn is refused naming the run, and in a later turn the stored run makes
    it a duplicate."""
    silent = ScriptedSnakeLab(reply=None)
    settle = {"AX3L_SNAKELAB_TIMEOUT": "0.3", "AX3L_SUBMIT_SETTLE_WAIT": "0.5"}
    async with broker_on(silent, databases, lab, **settle) as broker:
        reply = await broker.single("gamma", 0.955)
        error = reply["error"]
        assert error["code"] == "handler_error" and "state is unknown" in error["message"]
        await asyncio.sleep(0)  # let the stand-in record what it got
        assert submits(silent) == ["simulation.submit"]
        assert {r["method"] for r in silent.received[1:]} == {"health"}
        async with Database(databases.settings(AX3L_SNAKELAB_DB_NAME=lab.db_name)) as db:
            (pending,) = await intents.pending_intents(db)
        # SnakeLab had in fact accepted it (it answered too late):
        candidate = SCHEMA.with_values(golden["config"], {"training.gamma": 0.955})
        run_id = lab.insert_run(candidate, status="queued")
        again = (await broker.single("gamma", 0.955, open_turn=False))["error"]
        assert again["code"] == "handler_error" and run_id in again["message"]
        assert "already has its accepted proposal" in again["message"]
        later = await broker.single("gamma", 0.955)
        assert later["code"] == "duplicate_config" and run_id in later["reason"]
    adopted = events(databases, "proposal_accepted", "simulation_submitted")
    assert [(e["name"], e["process_id"]) for e in adopted] == [
        ("proposal_accepted", run_id),
        ("simulation_submitted", run_id),
    ]
    assert all(e["content"]["adopted"] for e in adopted)
    assert len(submits(silent)) == 1
    assert pending.entry == "gamma"


def submits(lab: ScriptedSnakeLab) -> list[str]:
    """The submissions the stand-in received (the settle wait's health requests left out)."""
    return [r["method"] for r in lab.received if r["method"] != "health"]


async def test_snakelab_refusing_the_config_is_an_invalid_value(databases, lab, golden):
    """SnakeLab's invalid_config becomes an InvalidValue rejection; the intent is closed."""
    refusing = ScriptedSnakeLab(
        reply={
            "status": "error",
            "error": {"code": "invalid_config", "message": "$.training: replay too small"},
        }
    )
    async with broker_on(refusing, databases, lab) as broker:
        reply = await broker.single("gamma", 0.944)
    assert reply["code"] == "invalid_value" and "replay too small" in reply["reason"]
    rows = sql(databases, "SELECT state FROM submission_intents")
    assert rows == [("refused",)]


async def test_other_snakelab_errors_are_handler_errors(databases, lab, golden):
    """Any other SnakeLab error is passed back as handler_error and not retried."""
    refusing = ScriptedSnakeLab(
        reply={"status": "error", "error": {"code": "invalid_request", "message": "bad"}}
    )
    async with broker_on(refusing, databases, lab) as broker:
        reply = await broker.single("gamma", 0.943)
    assert reply["error"]["code"] == "handler_error" and "not retried" in reply["error"]["message"]
    assert len(refusing.received) == 1


async def test_multipart_dealer_and_oversized_messages_get_replies(databases, lab, broker):
    """Several frames, DEALER framing and messages over the size limit are all answered."""
    request = envelope("submit_single_value", {"parameter": "gamma", "value": 0.9})
    reply = await send_raw(broker.endpoint, [request, request])
    assert "one message frame" in reply["payload"]["error"]["message"]

    sock = zmq.asyncio.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(broker.endpoint)
        await sock.send(b"not json")
        (raw,) = await asyncio.wait_for(sock.recv_multipart(), 10)
    finally:
        sock.close(linger=0)
    assert json.loads(raw)["payload"]["error"]["code"] == "invalid_request"

    limit = broker.broker.settings.zmq_max_message_bytes
    huge = envelope("submit_single_value", {"parameter": "gamma", "value": 0.9, "x": "y" * limit})
    reply = await send_raw(broker.endpoint, huge)
    assert f"the limit is {limit}" in reply["payload"]["error"]["message"]
    received = events(databases, "tool_request_received")[-1]["content"]
    assert received["size_bytes"] == len(huge) and received["truncated"] is True


async def test_a_broken_golden_is_a_handler_error_not_the_models_fault(databases, lab, broker):
    """If the golden itself breaks the schema, the reply blames the golden, not the value."""
    golden = SCHEMA.with_values(SCHEMA.default_config(), {"epochs": 10})
    await write_golden(databases, "broken-golden", golden)
    reply = await broker.single("gamma", 0.95)
    assert reply["error"]["code"] == "handler_error"
    assert (
        "breaks the schema" in reply["error"]["message"] and "epochs" in reply["error"]["message"]
    )
    del golden["training"]
    await write_golden(databases, "partial-golden", golden)
    reply = await broker.single("gamma", 0.95)
    assert reply["error"]["code"] == "handler_error" and "no setting" in reply["error"]["message"]
