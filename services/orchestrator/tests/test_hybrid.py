"""The hybrid proposers llm+tpe and llm+model: the classical proposer keeps most turns, the LLM
decides a seeded share of them with the classical proposer's state in its prompt."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from ax3l.compare.tpe_advice import model_advice_suggestions
from ax3l.orchestrator.proposers.hybrid import good_count, llm_decides
from ax3l.testing.scripted_llm import random_call_ranges
from ax3l.testing.stack import Stack, check_history

STEPS = 4000


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5, 0.9])
@pytest.mark.parametrize("seed", [None, 0, 7, 1970])
def test_the_llm_decides_its_share_of_steps_within_a_binomial_interval(
    share: float, seed: int | None
) -> None:
    """Over 4,000 steps the LLM decides the configured share within 4 binomial sds, and so it
    does among the steps right after one it decided (draws, not a pattern like every third)."""
    decided = [llm_decides(n, share, seed) for n in range(STEPS)]

    def within(draws: list[bool]) -> bool:
        sd = math.sqrt(len(draws) * share * (1 - share))
        return abs(sum(draws) - len(draws) * share) <= 4 * sd

    assert within(decided)
    assert within([b for a, b in itertools.pairwise(decided) if a])
    assert all(llm_decides(n, 1.0, seed) for n in range(100))


def test_the_draws_are_paired_by_seed_and_nested_by_share() -> None:
    """The same seed gives the same steps (whatever the hybrid: the draw knows no proposer),
    another seed other steps, and a larger share keeps every step of a smaller one."""
    steps = range(2000)
    same = [llm_decides(n, 0.3, 1970) for n in steps]
    assert same == [llm_decides(n, 0.3, 1970) for n in steps]
    assert same != [llm_decides(n, 0.3, 1971) for n in steps]
    larger = [llm_decides(n, 0.5, 1970) for n in steps]
    assert all(b for a, b in zip(same, larger, strict=True) if a)


def test_tpe_splits_trials_like_optuna() -> None:
    """The best ceil(10%) of the trials, at most 25, are TPE's good ones."""
    assert [good_count(n) for n in (0, 1, 9, 10, 11, 250, 1000)] == [0, 1, 1, 1, 2, 25, 25]


# With this seed and share 0.5 the LLM decides steps 1 and 3 of the first four.
SEED = "0"


def test_hybrid_turns_follow_the_draw_and_the_model_reads_tpe_advice(stack: Stack) -> None:
    """With share 0.5 the seeded draw decides which turns are the LLM's, its prompt carries
    TPE's suggestions, and the others are proposed by TPE directly; the history stays
    consistent."""
    expected = [llm_decides(n, 0.5, int(SEED)) for n in range(4)]
    assert expected == [False, True, False, True]
    stack.start()
    model = stack.start_model({"then": {"random_call": random_call_ranges()}})
    # (the former name of AX3L_LLM_SHARE is still read)
    env = {"AX3L_HYBRID_MODEL_SHARE": "0.5", "AX3L_PROPOSER_SEED": SEED}
    proc = stack.orchestrator("llm+tpe", url=model.url, env=env)
    stack.wait_for(lambda: stack.count("configuration_compared") >= 4, 120, "four turns", proc)
    proc.stop()

    started = stack.events("conversation_started")
    roles = [
        (e.parameter, e.get("hybrid_role"), e.get("proposer"), e.get("decided_by"))
        for e in started[:4]
    ]
    assert roles == [
        ("hidden_size", "tpe", "tpe", "tpe"),
        ("sequence_length", "model", "llm+tpe", "llm"),
        ("batch_size", "tpe", "tpe", "tpe"),
        ("learning_rate", "model", "llm+tpe", "llm"),
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


def test_llm_plus_model_shows_the_run_models_estimates_and_its_suggestion(stack: Stack) -> None:
    """Under llm+model with share 1 the LLM decides every turn; once the model of every run has
    its runs, the prompt before the request holds a bounded table of predicted means +- sd with
    the seeds behind each value, and the model proposer's suggestion (which ax3l-compare reads
    back); below that, no advice. Each turn says who decided it."""
    stack.start()
    model = stack.start_model({"then": {"random_call": random_call_ranges()}})
    env = {"AX3L_LLM_SHARE": "1", "AX3L_PROPOSER_SEED": "5"}
    proc = stack.orchestrator("llm+model", url=model.url, env=env)
    stack.wait_for(lambda: stack.count("configuration_compared") >= 9, 240, "nine turns", proc)
    proc.stop()

    started = stack.events("conversation_started")
    assert all(
        (e.get("decided_by"), e.get("hybrid"), e.get("proposer"))
        == ("llm", "llm+model", "llm+model")
        for e in started
    )
    advice = [p for p in stack.events("prompt_sent") if p.source_name == "ModelAdvice"]
    assert advice, "no ModelAdvice after nine turns"
    first = advice[0]
    # The fit needs 5 completed runs (the seeding run and four turns): earlier turns have none.
    turns_before = [e for e in started if e.event_id < first.event_id]
    assert len(turns_before) >= 5
    lines = first.content.splitlines()
    rows = [line for line in lines[5:] if line.startswith("| ")]
    assert lines[3].startswith("| ") and "predicted mean ± sd" in lines[3]
    assert 1 <= len(rows) <= 12 and all("±" in row for row in rows)
    values = [float(row.split("|")[1]) for row in rows]
    assert values == sorted(values)
    assert any("none" not in row.rsplit("|", 2)[-2] for row in rows) or "further" in first.content
    (suggestion,) = model_advice_suggestions(first.content)
    assert set(suggestion) == set(_paths(str(first.parameter)))
    assert "The golden's own value" in lines[-1]
    # The advice is what the model was sent, right before the request for a value.
    sent = [r for r in model.requests() if first.content in [m["content"] for m in r["messages"]]]
    assert sent and sent[0]["messages"][-2]["content"] == first.content
    check_history(stack)


def _paths(entry_name: str) -> tuple[str, ...]:
    from ax3l.shared.registry import BY_NAME

    return BY_NAME[entry_name].paths


def test_llm_plus_model_gives_the_other_turns_to_the_model_proposer(stack: Stack) -> None:
    """With share 0.5 the turns the draw does not give the LLM are the model proposer's own
    conversations, saying so."""
    expected = [llm_decides(n, 0.5, int(SEED)) for n in range(4)]
    stack.start()
    model = stack.start_model({"then": {"random_call": random_call_ranges()}})
    env = {"AX3L_LLM_SHARE": "0.5", "AX3L_PROPOSER_SEED": SEED}
    proc = stack.orchestrator("llm+model", url=model.url, env=env)
    stack.wait_for(lambda: stack.count("configuration_compared") >= 4, 120, "four turns", proc)
    proc.stop()
    started = stack.events("conversation_started")[:4]
    assert [e.get("decided_by") for e in started] == ["llm" if x else "model" for x in expected]
    assert [e.get("proposer") for e in started] == ["llm+model" if x else "model" for x in expected]
    assert [e.get("hybrid_role") for e in started] == ["llm" if x else "model" for x in expected]
