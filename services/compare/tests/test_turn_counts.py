"""A repeat's turns counted from its events: by entry kind, and who proposed in ``llm+tpe``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ax3l.compare.repeat import RepeatPlan, RepeatResult, read_turns
from ax3l.compare.results import store_repeat
from ax3l.compare.tpe_advice import advice_suggestions, matches_a_suggestion, same_value
from ax3l.compare.turn_counts import TurnEvent, count_turns, entry_kinds
from ax3l.orchestrator.proposers.hybrid import advice_prompt
from ax3l.shared.config_schema import load_schema
from ax3l.shared.db.comparisons import create_comparison
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import (
    ConversationStarted,
    LlmRequestFailed,
    PromptSent,
    ProposalAccepted,
    ReplyReceived,
    model_of,
)

LAST_RUN = "00000000-0000-4000-8000-000000000005"


def _advice(*suggestions: dict[str, Any]) -> str:
    """The text of a TpeAdvice prompt, as the orchestrator builds it."""
    state = {
        "suggestions": list(suggestions),
        "trials": 4,
        "good_trials": 1,
        "good_threshold": 40,
        "best": [],
        "latest": [],
    }
    return advice_prompt(state).text


class _Conversation:
    """Writes one conversation's events the way the orchestrator and the broker do."""

    def __init__(self, log: EventLog, number: int, parameter: str, **started: Any):
        self.log, self.parameter = log, parameter
        self.process_id = f"conversation-{number}"
        self.started = {"proposer": "llm+tpe", "parameter": parameter, **started}

    async def _log(self, content: Any, source_name: str, process_id: str | None = None) -> None:
        await self.log.log(
            content,
            process_id=process_id or self.process_id,
            parameter=self.parameter,
            source_name=source_name,
        )

    async def start(self) -> None:
        await self._log(ConversationStarted(**self.started), self.started["proposer"])

    async def prompt(self, source_name: str, text: str) -> None:
        await self._log(PromptSent(text=text), source_name)

    async def reply(self) -> None:
        reply = ReplyReceived.model_validate({"content": "x" * 50})
        await self.log.log(reply, process_id=self.process_id)

    async def accepted(self, run_id: str, changes: dict[str, Any]) -> None:
        accepted = ProposalAccepted(parameter=self.parameter, changes=changes, run_id=run_id)
        await self._log(accepted, self.started["proposer"], run_id)

    async def rejected(self, name: str, parameter: str | None) -> None:
        rejection = model_of(name).model_validate({"parameter": parameter, "reason": "no"})
        await self.log.log(rejection, parameter=parameter, source_name="x")


async def _hybrid_history(log: EventLog) -> None:
    """TPE, a matching model turn (after a duplicate), a model turn off the advice (after a
    failed request and an invalid name), a pair matching within float noise, a TPE fallback
    for the model; then, past the last run, a rejection that must not count."""
    tpe = _Conversation(log, 1, "hidden_size", hybrid_role="tpe", proposer="tpe")
    await tpe.start()
    await tpe.accepted("00000000-0000-4000-8000-000000000001", {"model.hidden_size": 128})

    matched = _Conversation(log, 2, "sequence_length", hybrid_role="model")
    await matched.start()
    await matched.prompt(
        "TpeAdvice", _advice({"training.sequence_length": 12}, {"training.sequence_length": 16})
    )
    await matched.prompt("ValueRequest", "Propose a value for sequence_length.")
    await matched.reply()
    await matched.rejected("proposal_rejected_duplicate", "sequence_length")
    await matched.reply()
    await matched.accepted("00000000-0000-4000-8000-000000000002", {"training.sequence_length": 16})

    off = _Conversation(log, 3, "learning_rate", hybrid_role="model")
    await off.start()
    await off.prompt("TpeAdvice", _advice({"training.learning_rate": 0.0021}))
    await log.log(
        LlmRequestFailed(kind="timeout", parameter="learning_rate", correctable=False),
        process_id=off.process_id,
        parameter="learning_rate",
        source_name="ModelServer",
    )
    await off.reply()
    await off.rejected("proposal_rejected_invalid", None)
    await off.reply()
    await off.accepted("00000000-0000-4000-8000-000000000003", {"training.learning_rate": 0.003})

    pair = _Conversation(log, 4, "epsilon_pair", hybrid_role="model")
    await pair.start()
    await pair.prompt("TpeAdvice", _advice({"epsilon.initial": 0.9, "epsilon.decay": 0.95}))
    await pair.reply()
    await pair.accepted(
        "00000000-0000-4000-8000-000000000004",
        {"epsilon.initial": 0.1 + 0.8, "epsilon.decay": 0.95},
    )

    fallback = _Conversation(
        log, 5, "batch_size", hybrid_role="model", proposer="tpe", fallback_for="llm+tpe"
    )
    await fallback.start()
    await fallback.accepted(LAST_RUN, {"training.batch_size": 32})

    late = _Conversation(log, 6, "gamma", hybrid_role="tpe", proposer="tpe")
    await late.start()
    await late.rejected("proposal_rejected_duplicate", "gamma")


async def test_hybrid_turns_split_by_entry_kind_and_by_who_proposed(databases):
    """Accepted and wasted turns split into finite, continuous and (no entry) unknown; in
    llm+tpe accepted proposals count for the model or TPE (a fallback for its own proposer),
    and a model proposal matched TPE when it equals a suggestion of its conversation's advice,
    floats within isclose; the repeat row's content keeps both."""
    async with Database(databases.settings()) as db:
        await _hybrid_history(EventLog(db))
    conn = databases.connect("ax3l", databases.ax3l_db)
    try:
        with conn.cursor() as cur:
            turns = read_turns(cur, LAST_RUN, load_schema())
        assert turns.by_kind == {
            "finite": {"accepted": 3, "wasted": 1},
            "continuous": {"accepted": 2, "wasted": 1},
            "unknown": {"accepted": 0, "wasted": 1},
        }
        assert turns.proposed_by == {"model": 3, "tpe": 2, "model_matched_tpe": 2}
        assert (turns.accepted_proposals, turns.conversations, turns.fallback_turns) == (5, 5, 1)
        assert turns.wasted_kinds == {
            "llm_request_failed:timeout": 1,
            "proposal_rejected_duplicate": 1,
            "proposal_rejected_invalid": 1,
        }
        assert turns.wasted_reasons == {"duplicate": 1, "invalid_value": 1, "timeout": 1}
        assert turns.model_turns == 6  # five replies and the request that got none

        result = RepeatResult(RepeatPlan("llm+tpe", 0, 1970, 6), "finished", turns=turns)
        comparison_id = create_comparison(conn, ["llm+tpe"], 1, 6, {})
        store_repeat(conn, comparison_id, result)
    finally:
        conn.close()
    [(wasted, text)] = databases.query("SELECT wasted_turns, content FROM comparison_repeats")
    content = json.loads(text)
    assert wasted == 3
    assert content["by_kind"] == turns.by_kind and content["proposed_by"] == turns.proposed_by
    assert content["wasted_reasons"] == turns.wasted_reasons


@pytest.mark.parametrize(
    ("event", "content", "reason"),
    [
        ("llm_request_failed", {"kind": "no_tool_call"}, "no_tool_call"),
        ("llm_request_failed", {"kind": "wrong_arguments"}, "malformed_arguments"),
        ("llm_request_failed", {"kind": "wrong_tool"}, "wrong_tool"),
        ("llm_request_failed", {"kind": "length"}, "token_cap"),
        ("llm_request_failed", {"kind": "timeout"}, "timeout"),
        ("llm_request_failed", {"kind": "http_error"}, "server_error"),
        ("llm_request_failed", {"kind": "context_overflow"}, "server_error"),
        ("llm_request_failed", {"kind": "no_tool_call", "wasted": "timeout"}, "timeout"),
        ("proposal_rejected_invalid", {}, "invalid_value"),
        ("proposal_rejected_duplicate", {}, "duplicate"),
    ],
)
def test_each_wasted_turn_is_counted_under_its_reason(event, content, reason):
    """A failed request counts under the reason it states (else its kind's), the broker's
    refusals under invalid value and duplicate."""
    events = [
        TurnEvent("conversation_started", "gamma", "llm", {"proposer": "llm"}),
        TurnEvent(event, "gamma", "x", {"parameter": "gamma", **content}),
    ]
    turns = count_turns(events, entry_kinds(load_schema()))
    assert turns.wasted_reasons == {reason: 1} and turns.wasted_turns == 1


def test_other_proposers_have_no_proposed_by():
    """Conversations without a hybrid role give by_kind but no proposed_by."""
    events = [
        TurnEvent("conversation_started", "gamma", "tpe", {"proposer": "tpe"}),
        TurnEvent("proposal_accepted", "gamma", "tpe", {"changes": {"training.gamma": 0.95}}),
        TurnEvent("conversation_started", "hidden_size", "tpe", {"proposer": "tpe"}),
        TurnEvent("proposal_rejected_duplicate", "hidden_size", "x", {}),
    ]
    turns = count_turns(events, entry_kinds(load_schema()))
    assert turns.proposed_by == {} and "proposed_by" not in turns.content()
    assert turns.by_kind == {
        "finite": {"accepted": 0, "wasted": 1},
        "continuous": {"accepted": 1, "wasted": 0},
    }


def test_advice_is_read_from_the_orchestrators_prompt_and_matched_on_its_keys():
    """The suggestions round-trip through advice_prompt; a match needs every key of one
    suggestion, numbers equal as numbers; text without a JSON block has no suggestions."""
    suggestions = [{"model.hidden_size": 128}, {"model.hidden_size": 160}]
    assert advice_suggestions(_advice(*suggestions)) == suggestions
    assert advice_suggestions("no block here") == []
    assert matches_a_suggestion({"model.hidden_size": 160.0}, suggestions)
    assert not matches_a_suggestion({"model.hidden_size": 144}, suggestions)
    assert not matches_a_suggestion(
        {"epsilon.initial": 0.9}, [{"epsilon.initial": 0.9, "epsilon.decay": 0.95}]
    )
    assert same_value(0.1 + 0.2, 0.3) and not same_value(0.3, 0.31)


@pytest.mark.parametrize(("entry", "kind"), [("hidden_size", "finite"), ("gamma", "continuous")])
def test_entry_kinds_follow_the_registry_domain(entry, kind):
    """An entry whose choices the registry can list is finite, else continuous."""
    assert entry_kinds(load_schema())[entry] == kind


def test_llm_plus_model_counts_who_proposed_and_matches_the_model_advice():
    """Under llm+model the LLM's proposals count as ``llm``, the model proposer's as ``model``,
    and an LLM proposal equal to its ModelAdvice suggestion as ``llm_matched_model``."""
    advice = (
        "Advice from the model of every run ...\n"
        'Its suggestion: {"training.gamma": 0.97} (the highest expected improvement, 0.50, over'
        " the best predicted mean so far, 40.0). You may follow it or choose differently.\n"
    )
    hybrid = {"proposer": "llm+model", "hybrid": "llm+model"}
    events = [
        TurnEvent("conversation_started", "gamma", "x", {**hybrid, "hybrid_role": "llm"}),
        TurnEvent("prompt_sent", "gamma", "ModelAdvice", advice),
        TurnEvent("proposal_accepted", "gamma", "x", {"changes": {"training.gamma": 0.97}}),
        TurnEvent("conversation_started", "gamma", "x", {**hybrid, "hybrid_role": "llm"}),
        TurnEvent("prompt_sent", "gamma", "ModelAdvice", advice),
        TurnEvent("proposal_accepted", "gamma", "x", {"changes": {"training.gamma": 0.95}}),
        TurnEvent(
            "conversation_started",
            "gamma",
            "x",
            {"proposer": "model", "hybrid": "llm+model", "hybrid_role": "model"},
        ),
        TurnEvent("proposal_accepted", "gamma", "x", {"changes": {"training.gamma": 0.96}}),
    ]
    turns = count_turns(events, entry_kinds(load_schema()))
    assert turns.proposed_by == {"llm": 2, "model": 1, "llm_matched_model": 1}
