"""Each event of the catalog reads as one sentence in the list, from the content Ax3l stores."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ax3l.reports.event_contents import prefix_fields, summary
from ax3l.reports.event_sentences import BUILDERS, sentence
from ax3l.shared.events import CATALOG
from ax3l.testing.scripted_llm import completion, tool_call

RUN = "3f2a1b9c-0000-4000-8000-000000000001"


def said(name: str, content: Any, parameter: str | None = None, source: str | None = None) -> str:
    text = content if isinstance(content, str) else json.dumps(content)
    return summary(name, text, parameter=parameter, source_name=source)


def test_every_catalog_event_has_a_sentence():
    """No event name of the catalog falls back to raw JSON for want of a sentence builder."""
    worded_elsewhere = {"prompt_sent", "reply_received"}
    assert set(CATALOG) - worded_elsewhere == set(BUILDERS)


def test_configuration_compared_reads_its_reason():
    """A comparison reads exactly as the user's system words it."""
    content = {
        "golden_run_id": RUN,
        "latest_run_id": RUN,
        "current_golden_run_id": RUN,
        "reason": "High score: 37 < 45; model.hidden_size: 224 -> 272.",
    }
    assert said("configuration_compared", content) == (
        "High score: 37 < 45; model.hidden_size: 224 -> 272."
    )


def test_model_timeout_names_the_seconds_and_the_parameter():
    """A timed-out model request says how long it waited and on which entry."""
    content = {
        "kind": "timeout",
        "detail": "no reply within the timeout (ReadTimeout(''))",
        "http_status": None,
        "parameter": "hidden_size",
        "timeout_seconds": 300.0,
    }
    assert said("llm_request_failed", content) == "Model timed out after 300 s on hidden_size"
    del content["timeout_seconds"]
    assert said("llm_request_failed", content) == "Model timed out on hidden_size"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            {"kind": "connection_error", "detail": "ConnectError: refused"},
            "Model server unreachable on gamma: ConnectError: refused",
        ),
        (
            {"kind": "http_error", "detail": "HTTP 503: loading", "http_status": 503},
            "Model server answered HTTP 503 on gamma: HTTP 503: loading",
        ),
        (
            {"kind": "invalid_reply", "detail": "the reply has no choices"},
            "Model reply unreadable on gamma: the reply has no choices",
        ),
        (
            {"kind": "no_tool_call", "detail": "the model answered in prose: 'Hi'"},
            "Model answered without a tool call on gamma: the model answered in prose: 'Hi'",
        ),
        (
            {"kind": "wrong_tool", "detail": "the model called 'x', not 'submit_single_value'"},
            "Model called the wrong tool on gamma: the model called 'x', not 'submit_single_value'",
        ),
        (
            {"kind": "wrong_arguments", "detail": 'not JSON numbers: {"value": "a"}'},
            'Model sent wrong arguments on gamma: not JSON numbers: {"value": "a"}',
        ),
        (
            {"kind": "length", "detail": "finish_reason length", "max_tokens": 4096},
            "Model reply cut at max_tokens (4096) on gamma",
        ),
        ({"kind": "length", "detail": "x"}, "Model reply cut at max_tokens on gamma"),
        (
            {"kind": "context_overflow", "detail": "HTTP 400: too long"},
            "Prompt too long for the model's context on gamma",
        ),
        ({"kind": "novel", "detail": "odd"}, "Model failed (novel) on gamma: odd"),
    ],
)
def test_each_model_failure_kind_reads_as_a_sentence(content, expected):
    """Every failure kind the orchestrator stores is worded for the list."""
    assert said("llm_request_failed", {**content, "parameter": "gamma"}) == expected


def test_fallback_conversation_says_who_took_the_turn_and_why():
    """A turn taken by the fallback proposer names it, the entry and the model's streak."""
    content = {
        "proposer": "tpe",
        "parameter": "gamma",
        "fallback_for": "llm",
        "failure_streak": 3,
        "index": 4,
    }
    assert said("conversation_started", content) == (
        "tpe proposed for gamma after 3 failed model conversations"
    )
    normal = {"proposer": "llm", "parameter": "gamma"}
    assert said("conversation_started", normal) == "llm conversation for gamma started"
    assert said("conversation_started", {"parameter": "gamma"}) == "Conversation for gamma started"


def test_conversation_end_says_accepted_or_why_it_failed():
    """An ended conversation says its run was accepted, or the error that ended it."""
    accepted = {"proposer": "llm", "parameter": "gamma", "outcome": "accepted", "run_id": RUN}
    assert said("conversation_ended", accepted) == (
        "llm conversation for gamma ended: run 3f2a1b9c accepted"
    )
    failed = {"proposer": "llm", "parameter": "gamma", "outcome": "failed", "error": "model x"}
    assert said("conversation_ended", failed) == "llm conversation for gamma failed: model x"
    assert said("conversation_ended", {"reason": "done"}) == "Conversation ended: done"


def test_prompts_and_replies_read_as_sentences():
    """A prompt names its source and entry; a reply says what the model proposed."""
    assert said("prompt_sent", "\nThe golden gamma scored 40.\nMore", "gamma", "Comparison") == (
        "Comparison for gamma: The golden gamma scored 40."
    )
    reply = completion(
        {"role": "assistant", "tool_calls": [tool_call("submit_single_value", {"value": 272})]},
        "tool_calls",
    )
    assert said("reply_received", reply, "hidden_size") == "Model proposed hidden_size = 272"
    pair = completion(
        {
            "role": "assistant",
            "tool_calls": [tool_call("submit_pair_values", {"value_1": 1.0, "value_2": 0.99})],
        },
        "tool_calls",
    )
    assert said("reply_received", pair, "epsilon_pair") == (
        "Model proposed epsilon_pair: epsilon.initial = 1, epsilon.decay = 0.99"
    )
    cut = completion({"role": "assistant", "content": "Let me think"}, "length")
    assert said("reply_received", cut, "gamma") == (
        "Model reply cut at max_tokens, without a tool call"
    )


def test_proposals_read_with_their_values():
    """Accepted and rejected proposals show the entry's values and the verdict."""
    accepted = {
        "parameter": "hidden_size",
        "values": {"value": 272},
        "changes": {"model.hidden_size": 272},
        "run_id": RUN,
    }
    assert said("proposal_accepted", accepted) == (
        "Proposal accepted: hidden_size = 272 (run 3f2a1b9c)"
    )
    assert said("proposal_accepted", {"parameter": "gamma", "run_id": RUN}) == (
        "Proposal accepted for gamma (run 3f2a1b9c)"
    )
    duplicate = {
        "parameter": "hidden_size",
        "values": {"value": "272"},
        "code": "duplicate_config",
        "reason": "hidden_size = 272 already ran",
    }
    assert said("proposal_rejected_duplicate", duplicate) == (
        "Proposal rejected as a duplicate: hidden_size = 272; hidden_size = 272 already ran"
    )
    invalid = {"parameter": "gamma", "values": {"value": "-1e15"}, "reason": "below 0.8"}
    assert said("proposal_rejected_invalid", invalid) == (
        "Proposal rejected as invalid: gamma = -1e15; below 0.8"
    )


def test_tool_events_read_as_sentences():
    """The broker's request, start, completion and failure each read as a sentence."""
    envelope = {
        "protocol_version": 1,
        "method": "submit_single_value",
        "payload": {"parameter": "gamma", "value": 0.97},
    }
    received = {"size_bytes": 99, "text": json.dumps(envelope), "truncated": False}
    assert said("tool_request_received", received) == (
        "Tool request submit_single_value: gamma = 0.97"
    )
    assert said("tool_request_received", {"size_bytes": 5, "text": "{oops"}) == (
        "Tool request received (5 bytes, unreadable)"
    )
    assert said("tool_request_received", {"method": "submit_single_value"}) == (
        "Tool request submit_single_value"
    )
    started = {"method": "submit_single_value", "parameter": "gamma"}
    assert said("tool_execution_started", started) == "Executing submit_single_value for gamma"
    ok = {"method": "submit_single_value", "status": "ok", "run_id": RUN}
    assert said("tool_execution_completed", ok) == "submit_single_value accepted: run 3f2a1b9c"
    rejected = {"method": "submit_single_value", "status": "rejected", "code": "invalid_value"}
    assert said("tool_execution_completed", rejected) == (
        "submit_single_value rejected: invalid value"
    )
    failed = {"method": "nope", "error": {"code": "unknown_method", "message": "unknown nope"}}
    assert said("tool_execution_failed", failed) == "nope failed (unknown_method): unknown nope"


def test_run_events_read_as_sentences():
    """Submissions and run ends name the run, its purpose, score or error."""
    assert said("simulation_submitted", {"run_id": RUN, "queue_position": 0}, "gamma") == (
        "Run 3f2a1b9c submitted for gamma, queue position 0"
    )
    rotation = {"run_id": RUN, "purpose": "seed_rotation", "reused": True}
    assert said("simulation_submitted", rotation) == (
        "Run 3f2a1b9c submitted for the seed rotation (already in SnakeLab: reused)"
    )
    assert said("simulation_started", {"run_id": RUN, "state": "running"}) == "Run 3f2a1b9c started"
    completed = {"run_id": RUN, "state": "completed", "high_score": 41, "episode_count": 1500}
    assert said("simulation_completed", completed) == (
        "Run 3f2a1b9c completed: high score 41 in 1500 episodes"
    )
    failed = {"run_id": RUN, "state": "failed", "high_score": None, "error": "CUDA died"}
    assert said("simulation_failed", failed) == "Run 3f2a1b9c failed: CUDA died"
    for name in ("simulation_queued", "simulation_cancelled", "simulation_restarted"):
        assert said(name, {"run_id": RUN}).startswith("Run 3f2a1b9c ")


def test_experiment_events_read_as_sentences():
    """Checkpoints, exhaustion, goldens and seed rotations each read as a sentence."""
    order = ["hidden_size", "sequence_length", "batch_size", "learning_rate", "gamma"]
    assert said("round_robin_checkpoint", {"parameter_order": order, "index": 4}) == (
        "Turn 5 of 5: gamma"
    )
    exhausted = {"parameter": "hidden_size", "index": 0, "seed": 1984, "choices": 21}
    assert said("parameter_space_exhausted", exhausted) == (
        "hidden_size exhausted: all 21 values ran on seed 1984; turn skipped"
    )
    created = {"run_id": RUN, "high_score": 45, "seed": 1984, "kind": "promotion"}
    assert said("golden_config_created", created) == (
        "New golden configuration: run 3f2a1b9c, high score 45, seed 1984"
    )
    baseline = {**created, "kind": "fresh_baseline"}
    assert said("golden_config_created", baseline).endswith("(fresh baseline)")
    assert said("golden_config_replaced", {"run_id": RUN}) == (
        "Golden configuration replaced by run 3f2a1b9c"
    )
    kept = {"reason": "High score: 37 < 45; training.gamma: 0.96 -> 0.97."}
    assert said("golden_config_retained", kept) == (
        "Golden configuration kept: High score: 37 < 45; training.gamma: 0.96 -> 0.97."
    )
    rotation = {"seed": 1985, "previous_seed": 1984, "stagnant_cycles": 9}
    assert (
        said("seed_rotation_started", rotation)
        == "Seed rotation 1984 -> 1985 after 9 stagnant cycles"
    )
    assert said("golden_config_seed_incremented", rotation) == "Golden seed 1984 -> 1985"


def test_cut_contents_still_read_from_their_complete_fields():
    """A content cut mid-configuration still yields the fields stored before the cut."""
    text = json.dumps({"run_id": RUN, "high_score": 45, "config": {"a": 1, "b": [1, 2]}})
    cut = text[: text.index('"b"') + 5]
    assert prefix_fields(cut) == {"run_id": RUN, "high_score": 45}
    assert said("golden_config_created", cut) == (
        "New golden configuration: run 3f2a1b9c, high score 45"
    )


def test_contents_of_another_shape_fall_back_to_the_text():
    """A content the sentence cannot read is shown as it is (text, odd types)."""
    assert said("configuration_compared", "plain words") == "plain words"
    assert sentence("proposal_accepted", {"values": 5}) is None
    assert said("round_robin_checkpoint", {"index": "x"}) == '{"index": "x"}'


def test_a_seat_call_names_the_seat_and_what_it_did():
    """Seat calls read as who did what: a read, an accepted proposal, a rejected one."""
    base = {"seat": "claude", "checkpoint_event_id": 7}
    assert said("seat_call", {**base, "tool": "current_turn", "open": True}, "gamma") == (
        "Seat claude read the current turn on gamma"
    )
    assert said("seat_call", {**base, "tool": "current_turn", "open": False}) == (
        "Seat claude asked for the turn; none is open"
    )
    accepted = {
        **base,
        "tool": "submit_single_value",
        "values": {"value": 0.97},
        "outcome": "accepted",
        "run_id": RUN,
    }
    assert said("seat_call", accepted, "gamma").endswith(": accepted (run 3f2a1b9c)")
    assert "claude" in said("seat_call", accepted, "gamma")
    rejected = {**accepted, "outcome": "rejected", "reason": "already stored"}
    assert said("seat_call", rejected, "gamma").endswith(": rejected (already stored)")
    # The client's address as the endpoint saw it (a proxy's header: any text, escaped by the
    # page's autoescaping like every sentence).
    addressed = {**accepted, "client": "203.0.113.7"}
    assert said("seat_call", addressed, "gamma").startswith("Seat claude (from 203.0.113.7) ")
    refused = {"seat": "bot", "tool": "history", "reason": "no_golden", "client": "::1"}
    assert said("seat_call_refused", refused).startswith("Seat bot (from ::1) was refused")


def test_a_refused_seat_call_says_why_and_never_shows_a_token():
    """A refusal names the seat (or its absence) and the reason."""
    assert said("seat_call_refused", {"seat": None, "tool": None, "reason": "unknown token"}) == (
        "A request without a valid seat token was refused: unknown token"
    )
    refused = {"seat": "bot", "tool": "submit_pair_values", "message": "the turn is gamma"}
    assert said("seat_call_refused", refused) == (
        "Seat bot was refused calling submit_pair_values: the turn is gamma"
    )


GOLDEN = "ef56abcd-0000-4000-8000-000000000002"
CONFIRMATION_STARTED = {
    "candidate_run_id": RUN,
    "golden_run_id": GOLDEN,
    "golden_event_id": 12,
    "seed": 1970,
    "seeds": [1001971, 1001972],
    "candidate_high_score": 41,
    "golden_high_score": 40,
    "candidate_config": {"seed": 1970, "training": {"gamma": 0.97}},
    "golden_config": {"seed": 1970, "training": {"gamma": 0.96}},
    "parameter": "gamma",
    "index": 4,
}
CONFIRMATION_DECIDED = {
    "candidate_run_id": RUN,
    "golden_run_id": GOLDEN,
    "seeds": [1970, 1001971, 1001972],
    "candidate_scores": [41, 40, 40],
    "golden_scores": [40, 38, 39],
    "candidate_runs": [RUN, "r-2", "r-3"],
    "golden_runs": [GOLDEN, "g-2", "g-3"],
    "candidate_mean": 121 / 3,
    "golden_mean": 39.0,
    "decision": "promoted",
    "problem": None,
}


def test_a_confirmation_start_names_the_runs_the_beaten_score_and_the_seeds():
    """A started confirmation says which run beat which golden by how much, and on which
    seeds both now run; what is missing is left out of the sentence."""
    assert said("promotion_confirmation_started", CONFIRMATION_STARTED) == (
        "Confirming run 3f2a1b9c (41 > 40 on seed 1970) against golden run ef56abcd:"
        " both run on seeds 1001971, 1001972"
    )
    partial = {"candidate_run_id": RUN, "seeds": [1001971], "candidate_high_score": 41}
    assert said("promotion_confirmation_started", partial) == (
        "Confirming run 3f2a1b9c (41) against the golden: both run on seed 1001971"
    )
    assert said("promotion_confirmation_started", {"seeds": [7]}) == (
        "Confirming a candidate against the golden: both run on seed 7"
    )


def test_a_confirmation_decision_reads_both_means_their_scores_and_the_verdict():
    """A decided confirmation shows each side's mean and scores over the seeds, the decision
    and, when a confirmation run ended without a score, the problem."""
    assert said("promotion_confirmation_decided", CONFIRMATION_DECIDED) == (
        "Confirmation: candidate mean 40.3 (41, 40, 40) vs golden mean 39.0 (40, 38, 39)"
        " over seeds 1970, 1001971, 1001972: promoted"
    )
    failed = {
        **CONFIRMATION_DECIDED,
        "candidate_scores": [41, 40],
        "candidate_mean": None,
        "golden_mean": None,
        "golden_scores": None,
        "decision": "retained",
        "problem": "run 5d1e0f2a failed without a high score",
    }
    assert said("promotion_confirmation_decided", failed) == (
        "Confirmation: candidate (41, 40) over seeds 1970, 1001971, 1001972: golden retained;"
        " run 5d1e0f2a failed without a high score"
    )
    assert said("promotion_confirmation_decided", {"decision": "retained"}) == (
        "Confirmation: golden retained"
    )
    assert said("promotion_confirmation_decided", {"decision": "abandoned"}) == (
        "Confirmation: abandoned"
    )


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("promotion_confirmation_started", {}),
        ("promotion_confirmation_started", {"candidate_run_id": 5, "seeds": "1001971"}),
        ("promotion_confirmation_started", {"seeds": [1, "x"], "seed": [1970]}),
        ("promotion_confirmation_decided", {}),
        ("promotion_confirmation_decided", {"candidate_scores": "41", "golden_mean": "x"}),
        ("promotion_confirmation_decided", {"seeds": [None], "decision": 7, "problem": 3}),
    ],
)
def test_a_malformed_confirmation_content_shows_as_it_is(name, content):
    """A confirmation content of another shape never fails: the list shows its text."""
    assert sentence(name, content) is None
    assert said(name, content) == json.dumps(content)


def test_a_cut_or_odd_confirmation_content_keeps_what_it_can_read():
    """Fields that do not fit read as absent; a content cut mid-config keeps the fields stored
    before the cut."""
    odd = {**CONFIRMATION_STARTED, "golden_high_score": "forty", "seeds": [1001971, None]}
    assert said("promotion_confirmation_started", odd) == (
        "Confirming run 3f2a1b9c (41 on seed 1970) against golden run ef56abcd"
    )
    text = json.dumps(CONFIRMATION_STARTED)
    cut = text[: text.index('"training"') + 12]
    assert said("promotion_confirmation_started", cut).startswith(
        "Confirming run 3f2a1b9c (41 > 40"
    )
    lopsided = {**CONFIRMATION_DECIDED, "candidate_mean": True, "golden_scores": [40, "38"]}
    assert said("promotion_confirmation_decided", lopsided) == (
        "Confirmation: candidate (41, 40, 40) vs golden mean 39.0 over seeds 1970, 1001971,"
        " 1001972: promoted"
    )


def test_markup_in_a_confirmation_stays_text_for_the_templates_to_escape():
    """Run ids and problems are untrusted: the sentence keeps their characters as they are
    (the event log escapes them; the page test checks that), cut to a run id's 8 characters."""
    hostile = {"candidate_run_id": "<script>alert(1)</script>", "seeds": [1001971]}
    assert said("promotion_confirmation_started", hostile) == (
        "Confirming run <script> against the golden: both run on seed 1001971"
    )


def test_a_confirmation_run_says_what_it_was_submitted_for():
    """A run the orchestrator submits to confirm a promotion says so."""
    content = {"run_id": RUN, "purpose": "confirmation"}
    assert said("simulation_submitted", content) == (
        "Run 3f2a1b9c submitted for a promotion's confirmation"
    )


def test_a_snakelab_host_going_down_and_up_reads_as_a_sentence() -> None:
    """Several hosts: a host that stops answering and answers again, named by its endpoint;
    without one, the generic sentence."""
    down = said("snakelab_host_down", {"endpoint": "tcp://10.0.0.2:41970"})
    assert down == "SnakeLab host tcp://10.0.0.2:41970 does not answer: skipped until it does"
    assert said("snakelab_host_up", {"endpoint": "tcp://10.0.0.2:41970"}) == (
        "SnakeLab host tcp://10.0.0.2:41970 answers again"
    )
    assert "SnakeLab host" not in (said("snakelab_host_up", {}) or "")
