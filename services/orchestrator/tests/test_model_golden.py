"""``AX3L_GOLDEN=model`` and the ``model`` proposer on the reference SnakeLab's surrogate."""

from __future__ import annotations

import pytest
from orchestrator_stack import compared

from ax3l.testing.stack import FIXED_EXCEPT_HIDDEN_SIZE, Stack, check_history, narrowed_schema

SCHEMA = narrowed_schema(
    {
        "model.hidden_size": {"minimum": 64, "maximum": 384},
        **{k: v for k, v in FIXED_EXCEPT_HIDDEN_SIZE.items() if k != "training.batch_size"},
    }
)
FOLLOW = {"AX3L_GOLDEN": "model", "AX3L_SEED_STAGNANT_ROUNDS": "100"}


def _follow_ups(stack: Stack) -> dict[int, list[str]]:
    """Per decision of a comparison, the events written as its child by the model step."""
    decisions = {
        e.event_id
        for e in stack.events("golden_config_created", "golden_config_retained")
        if e.name == "golden_config_retained" or e.get("kind") == "promotion"
    }
    found: dict[int, list[str]] = {d: [] for d in decisions}
    for e in stack.events("golden_config_created", "model_recommendation"):
        if e.parent in found and (e.name == "model_recommendation" or e.get("kind") == "model"):
            found[e.parent].append(e.name)
    return found


def test_the_golden_follows_the_model_after_every_comparison(stack: Stack) -> None:
    """The model proposer under AX3L_GOLDEN=model: every comparison's decision is followed by
    exactly one model step; a golden of kind model is a configuration that ran on the current
    seed, with that run's score; below five runs the model says why it cannot answer."""
    stack.use_schema(SCHEMA)
    stack.start()
    proc = stack.orchestrator("model", env=FOLLOW)
    stack.wait_for(compared(stack, 14), 180, "fourteen steps", proc)
    proc.stop()

    follow_ups = _follow_ups(stack)
    assert len(follow_ups) >= 14
    newest = max(follow_ups)
    assert all(len(v) == 1 for k, v in follow_ups.items() if k != newest), follow_ups
    runs = {r["run_id"]: r for r in stack.runs()}
    goldens = stack.events("golden_config_created")
    followed = [g for g in goldens if g.get("kind") == "model"]
    for golden in followed:
        run = runs[golden.get("run_id")]
        assert run["seed"] == golden.get("seed") and run["high_score"] == golden.get("high_score")
        assert golden.get("predicted_mean") is not None and golden.get("runs") >= 5
        assert "The model of every run recommends" in str(golden.get("reason"))
    kept = stack.events("model_recommendation")
    early = [k for k in kept if k.get("problem")]
    assert all("the model needs 5" in str(k.get("problem")) for k in early)
    assert any(k.get("predicted_mean") is not None for k in kept) or followed
    # The model proposer explains each choice once it has a model.
    ended = [e for e in stack.events("conversation_ended") if e.get("outcome") == "accepted"]
    assert any(
        isinstance(e.get("model"), dict) and "expected_improvement" in e.get("model") for e in ended
    )
    check_history(stack)


@pytest.mark.long  # tens of seconds: make test-long
def test_a_crash_after_the_model_golden_does_not_write_it_twice(stack: Stack) -> None:
    """Killed right after a golden that follows the model is stored, then restarted: the step
    is not redone (one follow-up per decision) and the loop goes on."""
    stack.use_schema(SCHEMA)
    stack.start()
    stack.crash_at("after_model_golden", proposer="random", env=FOLLOW, timeout=180)
    before = stack.count("golden_config_created", "model_recommendation")
    steps = stack.count("configuration_compared")
    proc = stack.orchestrator("random", env=FOLLOW)
    stack.wait_for(compared(stack, steps + 2), 120, "two more steps", proc)
    proc.stop()
    assert stack.count("golden_config_created", "model_recommendation") > before
    follow_ups = _follow_ups(stack)
    newest = max(follow_ups)
    assert all(len(v) == 1 for k, v in follow_ups.items() if k != newest), follow_ups
    check_history(stack)
