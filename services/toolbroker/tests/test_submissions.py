"""The handlers' decisions through a real socket, against the reference SnakeLab."""

import json

import pytest
from broker_harness import SCHEMA, event_names, request_message, sql

import ax3l.shared.db.intents as intents
from ax3l.shared.db.database import Database


def golden_with(golden, changes):
    return SCHEMA.with_values(golden["config"], changes)


async def test_accepted_single_value_is_submitted_once_and_logged(databases, lab, golden, broker):
    """A legal new value becomes one SnakeLab run of the golden config with only that change."""
    before = lab.run_count()
    reply = await broker.single("hidden_size", 64)
    assert reply["status"] == "ok" and set(reply) == {"status", "run_id"}
    assert lab.run_count() == before + 1
    assert lab.stored_config(reply["run_id"]) == golden_with(golden, {"model.hidden_size": 64})
    names = event_names(databases)
    assert names[-5:] == [
        "tool_request_received",
        "tool_execution_started",
        "proposal_accepted",
        "simulation_submitted",
        "tool_execution_completed",
    ]
    rows = sql(
        databases,
        "SELECT e.name, e.process_id, e.parent_event_id, e.parameter, m.content FROM events e"
        " JOIN event_messages m ON m.event_id = e.event_id"
        " WHERE e.name IN ('tool_request_received', 'proposal_accepted', 'simulation_submitted')"
        " ORDER BY e.event_id",
    )
    _received, proposal, submitted = rows[-3:]
    proposal_content = json.loads(proposal[4])
    assert proposal[1] == submitted[1] == reply["run_id"] and proposal[3] == "hidden_size"
    assert proposal_content["values"] == {"value": 64}
    assert proposal_content["changes"] == {"model.hidden_size": 64}
    assert proposal_content["golden_run_id"] == golden["run_id"]
    assert json.loads(submitted[4])["run_id"] == reply["run_id"]
    async with Database(databases.settings()) as db:
        assert await intents.pending_intents(db) == []


async def test_accepted_submissions_leave_the_golden_configuration_as_it_was(
    databases, lab, golden, broker
):
    """S73: the broker accepts and submits, it never selects: after an accepted single, an
    accepted pair and a rejected value, the golden is the same event, run and configuration,
    no golden, comparison or high-score row was written, and the runs are the golden's
    configuration with one change each."""
    from ax3l.shared.db.reads import current_golden

    async with Database(databases.settings()) as db:
        before = await current_golden(db)
    highscores = sql(databases, "SELECT event_id, score FROM experiment_highscores")
    single = await broker.single("hidden_size", 80)
    pair = await broker.pair("reward_pair", 5, -5)
    rejected = await broker.single("gamma", 7)
    assert single["status"] == pair["status"] == "ok" and rejected["status"] == "rejected"
    async with Database(databases.settings()) as db:
        after = await current_golden(db)
    assert before is not None and after is not None
    assert after[0] == before[0] and after[1] == before[1]
    assert after[1].run_id == golden["run_id"] and after[1].config == golden["config"]
    assert sql(databases, "SELECT event_id, score FROM experiment_highscores") == highscores
    written = event_names(databases)
    assert written.count("golden_config_created") == 1
    assert not {"golden_config_replaced", "golden_config_retained", "configuration_compared"} & set(
        written
    )
    assert lab.stored_config(pair["run_id"]) == golden_with(
        golden,
        {"game.rewards.closer_to_food": 5, "game.rewards.further_from_food": -5},
    )


async def test_integral_float_for_an_integer_setting_is_submitted_as_integer(
    databases, lab, golden, broker
):
    """64.0 for hidden_size is legal and stored as the integer 64."""
    reply = await broker.single("hidden_size", 96.0)
    assert reply["status"] == "ok"
    stored = lab.stored_config(reply["run_id"])
    assert stored["model"]["hidden_size"] == 96 and isinstance(stored["model"]["hidden_size"], int)


async def test_accepted_pair_may_keep_one_value(databases, lab, golden, broker):
    """A pair changing only value_2 is accepted and changes exactly the pair's second setting."""
    initial = golden["config"]["epsilon"]["initial"]
    reply = await broker.pair("epsilon_pair", initial, 0.98)
    assert reply["status"] == "ok"
    assert lab.stored_config(reply["run_id"]) == golden_with(golden, {"epsilon.decay": 0.98})


@pytest.mark.parametrize(
    ("parameter", "value", "fragment"),
    [
        ("hidden_size", 65, "multiple of 16"),
        ("hidden_size", 400, "maximum"),
        ("hidden_size", 64.5, "not an integer"),
        ("learning_rate", 0.1, "maximum"),
        ("gamma", True, "boolean"),
        ("gamma", "0.97", "string"),
        ("gamma", None, "null"),
        ("gamma", [0.97], "JSON number"),
        ("gamma", 10**400, "maximum"),
        ("epsilon_pair", 0.9, "pair"),
    ],
)
async def test_illegal_single_values_are_rejected_with_invalid_value(
    databases, lab, golden, broker, parameter, value, fragment
):
    """Out-of-range, off-step, non-integer, non-number and wrong-kind proposals are refused."""
    before = lab.run_count()
    reply = await broker.single(parameter, value)
    assert reply["status"] == "rejected" and reply["code"] == "invalid_value"
    assert fragment in reply["reason"]
    assert reply["source_name"] == "InvalidValue" and reply["reason"][:20] in reply["prompt"]
    assert lab.run_count() == before
    assert "proposal_rejected_invalid" in event_names(databases)


@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
async def test_non_finite_numbers_are_rejected(databases, lab, golden, broker, token):
    """NaN and infinities (however spelled in the JSON) are refused as invalid values."""
    await broker.open_turn("gamma")
    raw = (
        b'{"protocol_version": 1, "sender": "mcp-snakelab", "target": "snakelab",'
        b' "method": "submit_single_value", "payload": {"parameter": "gamma", "value": '
        + token
        + b"}}"
    )
    reply = (await broker.send_raw(raw))["payload"]
    assert reply["code"] == "invalid_value" and "finite" in reply["reason"]


async def test_reward_pair_rules_and_both_values_reported(databases, lab, golden, broker):
    """Both pair values are checked and every broken rule is named."""
    reply = await broker.pair("reward_pair", 2.5, 1)
    assert reply["code"] == "invalid_value"
    assert "value_1 (game.rewards.closer_to_food)" in reply["reason"]
    assert "value_2 (game.rewards.further_from_food)" in reply["reason"]


async def test_pair_values_are_checked_before_the_golden_is_read(databases, lab, broker):
    """Without any golden, an illegal pair is still rejected as invalid (not a golden error)."""
    before = lab.run_count()
    reply = await broker.pair("epsilon_pair", 0.5, 0.95)
    assert reply["code"] == "invalid_value" and "value_1" in reply["reason"]
    reply = await broker.pair("epsilon_pair", 0.9, 0.95)
    assert (
        reply == {"error": {"code": "handler_error", "message": reply["error"]["message"]}}
        and "no golden configuration" in reply["error"]["message"]
    )
    assert lab.run_count() == before


async def test_unchanged_configuration_is_rejected_as_duplicate(databases, lab, golden, broker):
    """Proposing the golden's own value changes nothing and is refused with NoDupes."""
    gamma = golden["config"]["training"]["gamma"]
    reply = await broker.single("gamma", gamma)
    assert reply["code"] == "duplicate_config" and "changes nothing" in reply["reason"]
    assert reply["source_name"] == "NoDupes"
    epsilon = golden["config"]["epsilon"]
    reply = await broker.pair("epsilon_pair", epsilon["initial"], epsilon["decay"])
    assert reply["code"] == "duplicate_config"


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled", "queued", "running"])
async def test_stored_runs_of_any_status_and_version_are_duplicates(
    databases, lab, golden, broker, status
):
    """A run of the same 26 columns blocks the proposal whatever its status or version."""
    existing = lab.insert_run(
        golden_with(golden, {"training.gamma": 0.97}), status=status, version="1.0.0"
    )
    before = lab.run_count()
    reply = await broker.single("gamma", 0.970)
    assert reply["code"] == "duplicate_config" and existing in reply["reason"]
    assert status in reply["reason"]
    assert lab.run_count() == before
    assert "proposal_rejected_duplicate" in event_names(databases)


async def test_same_values_on_another_seed_are_not_duplicates(databases, lab, golden, broker):
    """Earlier seeds do not block: only all 26 columns equal, seed included, is a duplicate."""
    lab.insert_run(golden_with(golden, {"training.gamma": 0.93, "seed": 1969}))
    assert (await broker.single("gamma", 0.93))["status"] == "ok"
    again = await broker.single("gamma", 0.93)
    assert again["code"] == "duplicate_config"


async def test_runs_of_the_broker_itself_become_duplicates(databases, lab, golden, broker):
    """A value accepted once is a duplicate the second time (pairs too)."""
    assert (await broker.pair("reward_pair", 3, -1))["status"] == "ok"
    assert (await broker.pair("reward_pair", 3.0, -1.0))["code"] == "duplicate_config"


@pytest.mark.parametrize(
    ("envelope", "code", "fragment"),
    [
        ({"extra": 1}, "invalid_request", 'unexpected "extra"'),
        ({"protocol_version": True}, "invalid_request", "protocol_version"),
        ({"protocol_version": 2}, "invalid_request", "protocol_version"),
        ({"target": "reports"}, "invalid_request", "target"),
        ({"payload": [1]}, "invalid_request", "payload"),
        ({"method": "simulation.cancel"}, "unknown_method", "unknown method"),
    ],
)
async def test_protocol_errors_are_answered_and_the_listener_keeps_serving(
    databases, lab, golden, broker, envelope, code, fragment
):
    """Malformed envelopes and unknown methods get their error reply; the next request works."""
    message = request_message("submit_single_value", {"parameter": "gamma", "value": 0.95})
    reply = await broker.send_raw(json.dumps({**message, **envelope}).encode())
    assert reply["sender"] == "ax3l" and reply["payload"]["error"]["code"] == code
    assert fragment in reply["payload"]["error"]["message"]
    assert (await broker.single("gamma", 0.95))["status"] == "ok"


@pytest.mark.parametrize(
    "payload",
    [{"parameter": "gamma"}, {"parameter": "gamma", "value": 0.9, "pair": "x"}, {"value": 1}],
)
async def test_payload_fields_must_be_exact(databases, lab, golden, broker, payload):
    """Missing or extra payload fields are protocol errors (the MCP server builds payloads)."""
    reply = await broker.request("submit_single_value", payload)
    assert reply["method"] == "submit_single_value" and reply["target"] == "mcp-snakelab"
    assert reply["payload"]["error"]["code"] == "invalid_request"


async def test_replies_echo_sender_and_method(databases, lab, golden, broker):
    """The reply is addressed to the request's sender, with the request's method."""
    await broker.open_turn("gamma")
    reply = await broker.request(
        "submit_single_value", {"parameter": "gamma", "value": 0.91}, sender="tester"
    )
    assert {k: reply[k] for k in ("protocol_version", "sender", "target", "method")} == {
        "protocol_version": 1,
        "sender": "ax3l",
        "target": "tester",
        "method": "submit_single_value",
    }
