import json

import pytest

from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, to_content
from ax3l.shared.db.event_reads import latest, parse_message, select
from ax3l.shared.event_models import (
    MODELS,
    ConfigurationCompared,
    ConversationEnded,
    ConversationResumed,
    ConversationStarted,
    EventContent,
    GoldenConfigCreated,
    GoldenConfigRetained,
    GoldenConfigSeedIncremented,
    LlmRequestFailed,
    ParameterSpaceExhausted,
    PromptSent,
    ProposalAccepted,
    ProposalRejectedDuplicate,
    ProposalRejectedInvalid,
    ReplyReceived,
    RoundRobinCheckpoint,
    SeatCall,
    SeatCallRefused,
    SeedRotationStarted,
    SimulationFailed,
    SimulationStarted,
    SimulationSubmitted,
    ToolExecutionCompleted,
    ToolExecutionFailed,
    ToolExecutionStarted,
    ToolRequestReceived,
    read_content,
)
from ax3l.shared.events import CATALOG, Category, Level

CONFIG = {"model": {"hidden_size": 128}, "training": {"gamma": 0.97, "learning_rate": 1e-4}}

# What each migrated writer's dict held (in its key order, with its conditional keys), and the
# model it now builds. Names and values mirror the writers: non-ASCII text, floats, nulls,
# nested configs and the keys written only sometimes.
WRITTEN = [
    (
        RoundRobinCheckpoint,
        {"parameter_order": ["hidden_size", "gamma"], "index": 1},
    ),
    (
        ParameterSpaceExhausted,
        {"parameter": "batch_size", "index": 2, "seed": 1970, "golden_run_id": "g", "choices": 4},
    ),
    (
        ConversationStarted,
        {
            "proposer": "llm",
            "parameter": "gamma",
            "index": 4,
            "loop_process_id": "loop",
            "checkpoint_event_id": None,
            "golden_run_id": "g",
            "seed": 1970,
            "pipelined": True,
            "while_run_id": "w",
            "fallback_for": "llm",
            "failure_streak": 3,
        },
    ),
    (
        ConversationEnded,
        {
            "proposer": "tpe",
            "parameter": "gamma",
            "outcome": "accepted",
            "run_id": "r",
            "mcp_sessions": [{"spawn_seconds": 0.1234, "prepared": True, "wait_seconds": 0.0}],
        },
    ),
    (
        ConversationEnded,
        {
            "proposer": "llm",
            "parameter": "gamma",
            "pipelined": True,
            "outcome": "failed",
            "error": "model timeout: the conversation ran past its 60 s deadline — über",
        },
    ),
    (
        ConversationResumed,
        {
            "proposer": "llm",
            "parameter": "gamma",
            "index": 4,
            "checkpoint_event_id": 7,
            "golden_run_id": "g",
            "seed": 1970,
            "while_run_id": "w",
            "call_held": False,
            "held_seconds": None,
            "ahead_seconds": 12.5,
        },
    ),
    (
        ToolRequestReceived,
        {"size_bytes": 120, "text": '{"method": "submit"}', "truncated": False},
    ),
    (ToolExecutionStarted, {"method": "submit_single_value", "parameter": "gamma"}),
    (
        ToolExecutionFailed,
        {
            "method": None,
            "error": {"code": "invalid_request", "message": "not JSON"},
            "turn_refusal": {"open": "gamma"},
        },
    ),
    (
        ToolExecutionCompleted,
        {"method": "submit_single_value", "status": "rejected", "code": "duplicate_config"},
    ),
    (
        ProposalRejectedDuplicate,
        {
            "parameter": "gamma",
            "values": {"value": "0.97"},
            "code": "duplicate_config",
            "reason": "already ran",
            "prompt": "NoDupes",
            "run_ids": ["a", "b"],
            "checkpoint_event_id": 5,
        },
    ),
    # A broker's invalid-value rejection outside a turn: no parameter, no checkpoint.
    (
        ProposalRejectedInvalid,
        {
            "parameter": None,
            "values": {"value": '"0.97"'},
            "code": "invalid_value",
            "reason": "not a number",
            "prompt": "InvalidValue: «0.97» is a string",
        },
    ),
    # The model's reply is stored as the server sent it.
    (
        ReplyReceived,
        {
            "id": "chatcmpl-1",
            "model": "gemma",
            "choices": [{"finish_reason": "length", "message": {"content": "Très bien"}}],
            "usage": {"completion_tokens": 512},
            "timings": {"predicted_per_second": 41.5},
        },
    ),
    # A model failure's facts (timeout_seconds, max_tokens) follow its fixed keys.
    (
        LlmRequestFailed,
        {
            "kind": "timeout",
            "detail": "no reply within 60 s",
            "http_status": None,
            "parameter": "gamma",
            "url": "http://127.0.0.1:27770/v1/chat/completions",
            "correctable": False,
            "timeout_seconds": 60.0,
        },
    ),
    # The seat endpoint's events: the seat first, the turn's checkpoint last when not given.
    (SeatCall, {"seat": "alice", "tool": "current_turn", "open": False}),
    (SeatCall, {"seat": "alice", "tool": "history", "entry": "gamma", "checkpoint_event_id": 7}),
    (
        SeatCall,
        {
            "seat": "alice",
            "tool": "submit_single_value",
            "values": {"value": 0.97},
            "checkpoint_event_id": 7,
            "seconds_since_turn_opened": 1.25,
            "outcome": "rejected",
            "code": "duplicate_config",
            "reason": "already ran",
        },
    ),
    (
        SeatCall,
        {
            "seat": "bob",
            "tool": "submit_pair_values",
            "values": {"value_1": 1, "value_2": 0.5},
            "checkpoint_event_id": 7,
            "seconds_since_turn_opened": 0.5,
            "outcome": "error",
            "error": {"code": "handler_error", "message": "no turn"},
        },
    ),
    (
        SeatCallRefused,
        {
            "seat": None,
            "tool": None,
            "reason": "no_token",
            "http_method": "POST",
            "path": "/mcp",
        },
    ),
    (
        SeatCallRefused,
        {
            "seat": "alice",
            "tool": "submit_single_value",
            "reason": "turn_taken",
            "message": "the turn for gamma was already taken by seat bob (run r)",
            "values": {"value": 0.97},
            "checkpoint_event_id": 7,
        },
    ),
    (
        ProposalAccepted,
        {
            "parameter": "gamma",
            "values": {"value": 0.97},
            "changes": {"training.gamma": 0.97},
            "run_id": "r",
            "config": CONFIG,
            "golden_run_id": "g",
            "golden_event_id": 3,
            "checkpoint_event_id": 5,
            "adopted": True,
        },
    ),
    # simulation_submitted has three writers, each with its own key order: the broker's, a
    # baseline's (first run, then a retry) and an infrastructure retry's.
    (SimulationSubmitted, {"run_id": "r", "config": CONFIG, "queue_position": None}),
    (
        SimulationSubmitted,
        {"run_id": "r", "config": CONFIG, "purpose": "seeding", "reused": False, "attempt": 1},
    ),
    (
        SimulationSubmitted,
        {
            "run_id": "r",
            "config": CONFIG,
            "purpose": "seeding",
            "reused": False,
            "attempt": 2,
            "reason": "retry",
            "retry_of": "q",
            "infrastructure_failure": True,
        },
    ),
    (
        SimulationSubmitted,
        {
            "run_id": "r",
            "config": CONFIG,
            "purpose": "retry",
            "reason": "retry",
            "retry_of": "q",
            "attempt": 3,
            "proposal_event_id": 9,
            "proposal_run_id": "p",
            "failed_error": None,
            "reused": True,
        },
    ),
    (SimulationStarted, {"run_id": "r", "state": "running"}),
    (
        SimulationFailed,
        {
            "run_id": "r",
            "state": "vanished",
            "high_score": None,
            "episode_count": None,
            "error": "gone",
            "timed_out": True,
            "never_trained": True,
        },
    ),
    (
        ConfigurationCompared,
        {
            "golden_run_id": "g",
            "latest_run_id": "r",
            "current_golden_run_id": "g",
            "reason": "High score: 41 > 40; training.gamma: 0.96 -> 0.97.",
            "parameter": "gamma",
            "index": 4,
            "high_score": 41,
            "golden_high_score": 40,
            "seed": 1970,
            "state": "completed",
            "changes": {"training.gamma": [0.96, 0.97]},
            "decision": "promoted",
            "proposal_run_id": "p",
            "never_trained": True,
        },
    ),
    (
        GoldenConfigCreated,
        {
            "run_id": "r",
            "config": CONFIG,
            "high_score": 41,
            "seed": 1971,
            "simulations": 12,
            "reason": "Fresh baseline",
            "kind": "seed_rotation",
            "previous_seed": 1970,
            "previous_run_id": "g",
            "previous_high_score": 40,
        },
    ),
    (
        GoldenConfigRetained,
        {"golden_run_id": "g", "run_id": "r", "reason": "<", "parameter": None, "index": None},
    ),
    (
        SeedRotationStarted,
        {
            "config": CONFIG,
            "seed": 1971,
            "previous_seed": 1970,
            "golden_run_id": "g",
            "golden_event_id": 3,
            "golden_high_score": 40,
            "stagnant_cycles": 9,
        },
    ),
    (GoldenConfigSeedIncremented, {"seed": 1971, "previous_seed": 1970, "golden_run_id": "g"}),
]


def test_every_catalog_event_has_a_model_named_after_it():
    """Each name in the catalog has exactly one model, and the model's category and level are
    the catalog's."""
    assert set(MODELS) == set(CATALOG)
    for name, model in MODELS.items():
        assert model.event == name
        assert (model.category(), model.level()) == CATALOG[name]
    assert ProposalAccepted.category() is Category.CONFIGURATION
    assert SimulationFailed.level() is Level.ERROR


@pytest.mark.parametrize(("model", "written"), WRITTEN, ids=lambda v: getattr(v, "event", ""))
def test_a_model_stores_the_bytes_the_dict_writer_stored(model, written):
    """Built from a writer's keys, a model's stored text is byte for byte the dict's."""
    built = model(**written)
    assert to_content(built) == to_content(written)
    assert to_content(built).encode() == json.dumps(written, ensure_ascii=False).encode()


@pytest.mark.parametrize(("model", "written"), WRITTEN, ids=lambda v: getattr(v, "event", ""))
def test_a_stored_content_reads_back_as_its_model_and_stores_alike(model, written):
    """Reading a stored text gives the event's model, which stores the same text again."""
    text = to_content(written)
    read = read_content(model.event, parse_message(text))
    assert type(read) is model
    assert to_content(read) == text
    assert read.keys() == tuple(written)


def test_a_prompt_is_stored_as_its_text():
    """A text content is stored as the text itself, not as JSON."""
    prompt = PromptSent(text="Propose a gamma — «0.97»?")
    assert to_content(prompt) == "Propose a gamma — «0.97»?"
    assert PromptSent.from_stored("hello").text == "hello"


@pytest.mark.parametrize(
    "prompt", ["42", '"hi"', "null", "true", "NaN", " [1, 2", "{not json", "[" * 100 + "]" * 100]
)
def test_a_stored_text_reads_back_as_that_text(prompt):
    """Every reader of events reads a content one way (the reports' pages too): a stored text
    that is not a JSON object or array, or that no reader should take, is the text itself, so a
    prompt written as ``42`` reads and shows as the text ``42``."""
    assert parse_message(to_content(PromptSent(text=prompt))) == prompt
    assert read_content("prompt_sent", parse_message(prompt)) == PromptSent(text=prompt)


def test_a_stored_object_or_array_reads_as_json():
    """An object or an array (leading blanks allowed) reads as its JSON; no content, None."""
    assert parse_message(' {"a": [1, 2.5]}') == {"a": [1, 2.5]}
    assert parse_message("[1, 2]") == [1, 2]
    assert parse_message(None) is None


def test_an_old_or_odd_row_still_reads():
    """Missing keys read None, unknown keys are kept, a value that does not fit its field reads
    None (the rest of the row still reads), and a non-object content reads as an empty model."""
    odd = RoundRobinCheckpoint.from_stored({"index": "3", "parameter_order": ["a"], "note": 1})
    assert (odd.index, odd.parameter_order, odd.get("note")) == (None, ["a"], 1)
    assert odd.get("index", "absent") is None and odd.get("missing", "absent") == "absent"
    boolean = ProposalAccepted.from_stored({"checkpoint_event_id": True, "run_id": "r"})
    assert (boolean.checkpoint_event_id, boolean.run_id) == (None, "r")
    assert GoldenConfigCreated.from_stored("not json").config is None
    assert GoldenConfigCreated.from_stored(None).keys() == ()
    assert type(read_content("an_unknown_event", {"a": 1})) is EventContent


def test_a_model_given_with_another_name_is_refused():
    """The old call form with a model of another event is a mistake, not a rename."""
    from ax3l.shared.db.event_log import _named

    with pytest.raises(ValueError, match="proposal_accepted"):
        _named("simulation_submitted", ProposalAccepted(run_id="r"))
    with pytest.raises(TypeError):
        _named(ProposalAccepted(run_id="r"), {"run_id": "r"})


async def test_both_call_forms_store_the_same_row_and_typed_reads_parse_it(databases):
    """A model and the old name-and-dict form write identical rows, and the typed reads return
    each stored row with its model."""
    written = next(content for model, content in WRITTEN if model is ConfigurationCompared)
    async with Database(databases.settings()) as db:
        log = EventLog(db)
        old = await log.log("configuration_compared", written, process_id="r", parameter="gamma")
        new = await log.log(ConfigurationCompared(**written), process_id="r", parameter="gamma")
        async with db.transaction("writing in a transaction") as cur:
            inside = await log.write(cur, ConfigurationCompared(**written), process_id="r")
        rows = await db.fetchall(
            "SELECT e.event_id, e.name, e.category, e.log_level, m.content FROM events e"
            " JOIN event_messages m ON m.event_id = e.event_id ORDER BY e.event_id"
        )
        found = await select(db, ConfigurationCompared, process_id="r")
        newest = await latest(db, ConfigurationCompared)
        async with db.transaction("reading in a transaction") as cur:
            through_cursor = await latest(cur, [ConfigurationCompared, "golden_config_created"])
    assert [row["event_id"] for row in rows] == [old, new, inside]
    assert {(r["name"], r["category"], r["log_level"], r["content"]) for r in rows} == {
        ("configuration_compared", "Configuration", "INFO", to_content(written))
    }
    assert [event.event_id for event in found] == [old, new, inside]
    assert all(isinstance(event.model, ConfigurationCompared) for event in found)
    assert newest is not None and newest.event_id == inside and newest.model.high_score == 41
    assert through_cursor is not None and through_cursor.event_id == inside
    assert to_content(newest.model) == rows[0]["content"]


async def test_the_intents_writer_stores_the_old_bytes(snakelab_tables):
    """``complete_intent`` stores exactly the text the dict-based writer stored, key order and
    the turn's ``checkpoint_event_id`` included."""
    from ax3l.shared.config_schema import load_schema
    from ax3l.shared.db import intents
    from ax3l.shared.db.config_index import ConfigIndex

    schema = load_schema()
    config = schema.with_values(schema.default_config(), {"training.gamma": 0.97})
    written = next(content for model, content in WRITTEN if model is ProposalAccepted)
    proposal = {**written, "config": config}
    del proposal["adopted"]  # only a reconciler's adoption says so
    async with Database(snakelab_tables.settings()) as db:
        log, index = EventLog(db), ConfigIndex(db, schema)
        intent_id = await intents.record_intent(
            db,
            entry=proposal["parameter"],
            config=config,
            values=proposal["values"],
            changes=proposal["changes"],
            fingerprint=index.fingerprint(config),
            golden_run_id=proposal["golden_run_id"],
            golden_event_id=proposal["golden_event_id"],
            after_id=await index.position(),
            source_name="SubmitSingleValueHandler",
            checkpoint_event_id=proposal["checkpoint_event_id"],
        )
        await intents.complete_intent(db, log, intent_id, proposal["run_id"], 2)
        rows = await db.fetchall(
            "SELECT e.name, m.content FROM events e JOIN event_messages m"
            " ON m.event_id = e.event_id ORDER BY e.event_id"
        )
    submitted = {"run_id": proposal["run_id"], "config": config, "queue_position": 2}
    assert [(row["name"], row["content"]) for row in rows] == [
        ("proposal_accepted", to_content(proposal)),
        ("simulation_submitted", to_content(submitted)),
    ]
