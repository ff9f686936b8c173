"""Turn integrity: the broker handles a proposal only for the entry of the live round-robin
turn (the latest checkpoint, not yet answered); stray clients are refused and reach nothing."""

import asyncio
import json

import pytest
from broker_harness import (
    SCHEMA,
    envelope,
    events,
    mcp_session,
    open_turn,
    send_raw,
    sql,
    text_of,
)

import ax3l.shared.db.intents as intents
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import ParameterSpaceExhausted, RoundRobinCheckpoint
from ax3l.shared.snakelab_client import SnakeLabClient


def proposal_events(dbs):
    return events(
        dbs, "proposal_accepted", "proposal_rejected_invalid", "proposal_rejected_duplicate"
    )


def refusals(dbs):
    return [e for e in events(dbs, "tool_execution_failed") if "turn_refusal" in e["content"]]


async def pending_intent(broker, golden, gamma, checkpoint):
    """A pending intent for gamma = ``gamma`` admitted in ``checkpoint``'s turn, as a broker
    leaves behind when SnakeLab's answer is lost; returns its id and configuration."""
    config = SCHEMA.with_values(golden["config"], {"training.gamma": gamma})
    intent_id = await intents.record_intent(
        broker.broker.db,
        entry="gamma",
        config=config,
        values={"value": gamma},
        changes={"training.gamma": gamma},
        fingerprint=broker.broker.index.fingerprint(config),
        golden_run_id=golden["run_id"],
        golden_event_id=None,
        after_id=await broker.broker.index.position(),
        checkpoint_event_id=checkpoint,
    )
    return intent_id, config


def error_of(result):
    assert result.is_error, text_of(result)
    error = json.loads(text_of(result))["error"]
    assert error["code"] == "handler_error"
    return error["message"]


async def test_a_standalone_session_for_another_entry_is_refused_during_a_live_turn(
    databases, lab, golden, broker
):
    """A second MCP session bound to gamma, submitting during hidden_size's live turn, is
    refused naming the turn, logged as a WARNING and never reaches SnakeLab; the turn's own
    session then submits normally."""
    checkpoint = await open_turn(databases, "hidden_size")
    before = lab.run_count()
    async with (
        mcp_session("hidden_size", broker.endpoint) as own,
        mcp_session("gamma", broker.endpoint) as stray,
    ):
        refused = await stray.call_tool("submit_single_value", {"value": 0.95})
        message = error_of(refused)
        assert "current turn is hidden_size" in message and f"event {checkpoint}" in message
        assert "not one for gamma" in message
        assert lab.run_count() == before
        assert sql(databases, "SELECT COUNT(*) FROM submission_intents") == [(0,)]
        assert proposal_events(databases) == []

        accepted = json.loads(text_of(await own.call_tool("submit_single_value", {"value": 80})))
    assert accepted["status"] == "ok" and lab.run_count() == before + 1
    (logged,) = refusals(databases)
    assert logged["log_level"] == "WARNING" and logged["parameter"] == "gamma"
    assert logged["content"]["turn_refusal"] == {
        "reason": "other_entry",
        "requested": "gamma",
        "checkpoint_event_id": checkpoint,
        "index": 0,
        "parameter": "hidden_size",
    }
    (proposal,) = proposal_events(databases)
    assert proposal["process_id"] == accepted["run_id"]
    assert proposal["content"]["checkpoint_event_id"] == checkpoint
    assert broker.broker.status.outcomes["refused_turn"] == 1


async def test_a_late_submission_after_acceptance_is_refused(databases, lab, golden, broker):
    """Once the turn has its accepted proposal, another value and the same value again are
    both refused naming the accepted run; SnakeLab gets exactly one run."""
    await open_turn(databases, "hidden_size")
    before = lab.run_count()
    async with mcp_session("hidden_size", broker.endpoint) as client:
        first = json.loads(text_of(await client.call_tool("submit_single_value", {"value": 96})))
        assert first["status"] == "ok"
        for value in (112, 96):
            message = error_of(await client.call_tool("submit_single_value", {"value": value}))
            assert "current turn, hidden_size" in message
            assert f"already has its accepted proposal (run {first['run_id']}" in message
    assert lab.run_count() == before + 1
    assert [e["name"] for e in proposal_events(databases)] == ["proposal_accepted"]
    assert [e["content"]["turn_refusal"]["reason"] for e in refusals(databases)] == [
        "turn_answered",
        "turn_answered",
    ]


async def test_two_clients_answering_the_open_turn_at_once_get_one_run(
    databases, lab, golden, broker
):
    """The listener handles requests serially: two proposals sent at the same moment on their
    own sockets give one accepted run and one turn_answered refusal, never two runs."""
    checkpoint = await broker.open_turn("hidden_size")
    before = lab.run_count()
    replies = await asyncio.gather(
        *(
            send_raw(
                broker.endpoint,
                envelope("submit_single_value", {"parameter": "hidden_size", "value": value}),
            )
            for value in (96, 112)
        )
    )
    payloads = [reply["payload"] for reply in replies]
    oks = [p for p in payloads if p.get("status") == "ok"]
    assert len(oks) == 1, f"not exactly one accepted run: {payloads}"
    (accepted,) = oks
    (refused,) = [p for p in payloads if p is not accepted]
    assert refused["error"]["code"] == "handler_error"
    message = refused["error"]["message"]
    assert f"already has its accepted proposal (run {accepted['run_id']}" in message
    assert lab.run_count() == before + 1
    (proposal,) = proposal_events(databases)
    assert proposal["name"] == "proposal_accepted"
    assert proposal["process_id"] == accepted["run_id"]
    assert proposal["content"]["checkpoint_event_id"] == checkpoint
    assert [e["content"]["turn_refusal"]["reason"] for e in refusals(databases)] == [
        "turn_answered"
    ]


async def test_rejections_keep_the_turn_open_for_the_correction(databases, lab, golden, broker):
    """An invalid and a duplicate proposal do not answer the turn: the corrected value after
    them is accepted, as in the orchestrator's correction loop."""
    checkpoint = await broker.open_turn("gamma")
    assert (await broker.single("gamma", 0.5, open_turn=False))["code"] == "invalid_value"
    gamma = golden["config"]["training"]["gamma"]
    assert (await broker.single("gamma", gamma, open_turn=False))["code"] == "duplicate_config"
    assert (await broker.single("gamma", 0.912, open_turn=False))["status"] == "ok"
    assert {e["content"]["checkpoint_event_id"] for e in proposal_events(databases)} == {checkpoint}


async def test_no_checkpoint_means_no_proposal(databases, lab, golden, broker):
    """Before the orchestrator stores any checkpoint every submission is refused."""
    before = lab.run_count()
    reply = await broker.single("gamma", 0.95, open_turn=False)
    assert reply["error"]["code"] == "handler_error"
    assert "no round-robin turn is open" in reply["error"]["message"]
    reply = await broker.pair("epsilon_pair", 0.9, 0.95, open_turn=False)
    assert "no round-robin turn is open" in reply["error"]["message"]
    assert lab.run_count() == before


@pytest.mark.parametrize("name", ["seed", "no_such_parameter", "epsilon_pair"])
async def test_names_other_than_the_turns_entry_are_refused_before_any_check(
    databases, lab, golden, broker, name
):
    """During gamma's turn any other name, tunable or not, is refused without a proposal event."""
    await broker.open_turn("gamma")
    reply = await broker.single(name, 1, open_turn=False)
    assert "current turn is gamma" in reply["error"]["message"]
    assert proposal_events(databases) == []


async def test_a_turn_skipped_as_exhausted_accepts_nothing(databases, lab, golden, broker):
    """A checkpoint answered by parameter_space_exhausted is finished: proposals are refused."""
    checkpoint = await broker.open_turn("hidden_size")
    exhausted = await broker.broker.log.log(
        ParameterSpaceExhausted(parameter="hidden_size"), parameter="hidden_size"
    )
    reply = await broker.single("hidden_size", 80, open_turn=False)
    message = reply["error"]["message"]
    assert f"checkpoint event {checkpoint}" in message
    assert f"skipped as exhausted (event {exhausted})" in message


async def test_a_checkpoint_of_another_order_accepts_nothing(databases, lab, golden, broker):
    """A checkpoint whose parameter order is not this Ax3l's opens no turn."""
    await broker.broker.log.log(
        RoundRobinCheckpoint(parameter_order=["hidden_size", "gamma"], index=1)
    )
    reply = await broker.single("gamma", 0.95, open_turn=False)
    assert "parameter order" in reply["error"]["message"]
    assert refusals(databases)[-1]["content"]["turn_refusal"]["reason"] == "order_changed"


async def test_an_unknown_outcome_holds_the_turn_until_reconciled(databases, lab, golden, broker):
    """While an earlier submission's outcome is unknown the turn is refused, however old the
    intent; once it is settled (SnakeLab answered again and has no run of it), the resubmission
    is accepted exactly once."""
    checkpoint = await broker.open_turn("gamma")
    intent_id, _ = await pending_intent(broker, golden, 0.923, checkpoint)
    sql(
        databases,
        "UPDATE submission_intents SET created_at = created_at - INTERVAL 1 HOUR"
        " WHERE intent_id = %s",
        (intent_id,),
    )
    reply = await broker.single("gamma", 0.924, open_turn=False)
    message = reply["error"]["message"]
    assert f"submission intent {intent_id} is still unknown" in message
    assert "current turn, gamma" in message
    db = broker.broker.db
    client = SnakeLabClient(lab.endpoint, timeout=1.0)
    assert await intents.settle_pending(db, SCHEMA, EventLog(db), client, wait_up_to=10) == []
    again = await broker.single("gamma", 0.924, open_turn=False)
    assert again["status"] == "ok"
    states = sql(databases, "SELECT intent_id, state FROM submission_intents ORDER BY intent_id")
    assert states == [(intent_id, "abandoned"), (intent_id + 1, "done")]
    (proposal,) = proposal_events(databases)
    assert proposal["content"]["checkpoint_event_id"] == checkpoint


async def test_a_late_adopted_run_answers_only_its_own_checkpoint(databases, lab, golden, broker):
    """A run adopted after a newer checkpoint names the checkpoint it was admitted for and does
    not answer the newer turn (the orchestrator's rule), whose own proposal is then accepted."""
    first = await broker.open_turn("gamma")
    _, candidate = await pending_intent(broker, golden, 0.927, first)
    run_id = lab.insert_run(candidate, status="queued")
    second = await broker.open_turn("gamma")
    db = broker.broker.db
    assert await intents.reconcile(db, SCHEMA, EventLog(db)) == [run_id]
    (adopted,) = proposal_events(databases)
    assert adopted["content"]["adopted"] is True
    assert adopted["content"]["checkpoint_event_id"] == first
    own = await broker.single("gamma", 0.928, open_turn=False)
    assert own["status"] == "ok"
    assert proposal_events(databases)[-1]["content"]["checkpoint_event_id"] == second
    late = await broker.single("gamma", 0.929, open_turn=False)
    assert f"checkpoint event {second}" in late["error"]["message"]
    assert own["run_id"] in late["error"]["message"]


async def test_a_pending_intent_of_an_older_turn_does_not_hold_the_live_one(
    databases, lab, golden, broker
):
    """An unknown outcome from an earlier checkpoint cannot answer the live turn, so the live
    turn's proposal is accepted while that intent is still pending."""
    older = await broker.open_turn("gamma")
    intent_id, _ = await pending_intent(broker, golden, 0.933, older)
    assert (await broker.single("gamma", 0.934))["status"] == "ok"
    states = dict(sql(databases, "SELECT intent_id, state FROM submission_intents"))
    assert states[intent_id] == "pending"
