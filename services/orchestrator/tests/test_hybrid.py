"""The hybrid proposer llm+tpe: TPE keeps most turns, the model gets a share with TPE's state."""

from __future__ import annotations

import json

import pytest

from ax3l.orchestrator.proposers.hybrid import good_count, model_takes_turn
from ax3l.testing.scripted_llm import random_call_ranges
from ax3l.testing.stack import Stack, check_history


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5, 1.0])
def test_the_model_takes_its_share_of_turns_spread_evenly(share: float) -> None:
    """Over any 100 turns the model gets round(100 * share) of them, never two too many."""
    turns = [model_takes_turn(n, share) for n in range(1000)]
    assert sum(turns) == round(1000 * share)
    for start in range(0, 900, 37):
        window = sum(turns[start : start + 100])
        assert abs(window - 100 * share) <= 1


def test_tpe_splits_trials_like_optuna() -> None:
    """The best ceil(10%) of the trials, at most 25, are TPE's good ones."""
    assert [good_count(n) for n in (0, 1, 9, 10, 11, 250, 1000)] == [0, 1, 1, 1, 2, 25, 25]


def test_hybrid_turns_alternate_by_share_and_the_model_reads_tpe_advice(stack: Stack) -> None:
    """With share 0.5 every other turn is the model's, its prompt carries TPE's suggestions, and
    the others are proposed by TPE directly; the history stays consistent."""
    stack.start()
    model = stack.start_model({"then": {"random_call": random_call_ranges()}})
    proc = stack.orchestrator("llm+tpe", url=model.url, env={"AX3L_HYBRID_MODEL_SHARE": "0.5"})
    stack.wait_for(lambda: stack.count("configuration_compared") >= 4, 120, "four turns", proc)
    proc.stop()

    started = stack.events("conversation_started")
    roles = [(e.parameter, e.get("hybrid_role"), e.get("proposer")) for e in started[:4]]
    assert roles == [
        ("hidden_size", "tpe", "tpe"),
        ("sequence_length", "model", "llm+tpe"),
        ("batch_size", "tpe", "tpe"),
        ("learning_rate", "model", "llm+tpe"),
    ]
    advice = [p for p in stack.events("prompt_sent") if p.source_name == "TpeAdvice"]
    assert [a.parameter for a in advice[:2]] == ["sequence_length", "learning_rate"]
    block = advice[0].content.split("```json\n", 1)[1].rsplit("\n```", 1)[0]
    state = json.loads(block)
    assert state["suggestions"] and all(
        set(s) == {"training.sequence_length"} for s in state["suggestions"]
    )
    # The advice comes right before the request for a value, in the request the model got.
    first_model_request = model.requests()[0]
    assert first_model_request["messages"][-2]["content"] == advice[0].content
    check_history(stack)
