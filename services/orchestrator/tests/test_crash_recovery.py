"""SIGKILL at every point that matters, then restart: nothing submitted twice, skipped or
repeated, and the cycle count and golden configuration stay right (``check_history``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from orchestrator_stack import compared, run_until

from ax3l.testing.stack import Stack, check_history, narrowed_schema, tiny_schema

RANDOM_HIDDEN = {"random_call": {"hidden_size": [[64, 384, 16]], "sequence_length": [[4, 48, 4]]}}


def seed_golden(stack: Stack, seed: int) -> Callable[[], bool]:
    return lambda: any(g.get("seed") == seed for g in stack.events("golden_config_created"))


def test_crash_after_the_seeding_submit_reuses_that_run(stack: Stack) -> None:
    """Killed between submitting the defaults and recording it: the run is found, not resent."""
    stack.start()
    stack.crash_at("seeding_after_submit")
    assert len(stack.runs()) == 1 and not stack.events()
    run_until(stack, compared(stack), "a first turn", timeout=90)
    (record,) = [
        e for e in stack.events("simulation_submitted") if e.source_name == "InitialSeeding"
    ]
    assert record.get("reused") is True and record.process_id == stack.runs()[0]["run_id"]
    summary = check_history(stack)
    assert summary.goldens[0].get("run_id") == stack.runs()[0]["run_id"]
    assert summary.goldens[0].get("simulations") == 1


def test_crash_while_waiting_for_the_seeding_run_resumes_it(stack: Stack) -> None:
    """Killed while waiting for the seeding run: the recorded submission is resumed."""
    stack.start()
    stack.crash_at("seeding_waiting")
    assert len(stack.events("simulation_submitted")) == 1
    run_until(stack, compared(stack), "a first turn", timeout=90)
    seeding = [e for e in stack.events("simulation_submitted") if e.source_name == "InitialSeeding"]
    assert len(seeding) == 1
    check_history(stack)


def test_crash_after_the_checkpoint_resumes_the_same_entry(stack: Stack) -> None:
    """Killed right after the checkpoint: the same entry is asked again, and done once."""
    stack.start()
    stack.crash_at("after_checkpoint")
    run_until(stack, compared(stack, 2), "two turns", timeout=90)
    checkpoints = [c.get("index") for c in stack.events("round_robin_checkpoint")]
    assert checkpoints[:3] == [0, 0, 1]
    assert check_history(stack).steps[:2] == [0, 1]


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_crash_during_the_model_call_retries_the_same_entry(stack: Stack) -> None:
    """Killed while the model is thinking: the prompts are stored, the entry is asked anew."""
    stack.start()
    model = stack.start_model({"replies": [{**RANDOM_HIDDEN, "delay": 30}], "then": RANDOM_HIDDEN})
    proc = stack.orchestrator("llm", url=model.url)
    stack.wait_for(lambda: model.requests(), 60, "the first model request", proc)
    proc.kill()
    first = stack.events("conversation_started")[0].process_id
    assert [e.name for e in stack.events() if e.process_id == first][-1] == "prompt_sent"
    run_until(stack, compared(stack, 2), "two turns", proposer="llm", url=model.url, timeout=90)
    started = stack.events("conversation_started")
    assert [c.parameter for c in started[:3]] == ["hidden_size", "hidden_size", "sequence_length"]
    assert not [e for e in stack.events("reply_received") if e.process_id == first]
    assert check_history(stack).steps[:2] == [0, 1]


@pytest.mark.parametrize(
    ("refused", "correction"),
    [(1000, "InvalidValue"), (224, "NoDupes")],  # 224: the default, the golden's hidden size
    ids=["invalid", "duplicate"],
)
def test_crash_during_a_validation_retry_resumes_the_same_entry(
    stack: Stack, refused: int, correction: str
) -> None:
    """Killed while the model answers the correction of a refused proposal: the restart
    checkpoints the same index, asks the same entry again, and the turn advances once."""
    stack.start()
    proposal = {"tool_call": {"name": "submit_single_value", "arguments": {"value": refused}}}
    model = stack.start_model(
        {"replies": [proposal, {**RANDOM_HIDDEN, "delay": 30}], "then": RANDOM_HIDDEN}
    )
    proc = stack.orchestrator("llm", url=model.url)
    stack.wait_for(lambda: len(model.requests()) >= 2, 60, "the correction sent back", proc)
    proc.kill()
    first = stack.events("conversation_started")[0].process_id
    prompts = [e for e in stack.events("prompt_sent") if e.process_id == first]
    assert prompts[-1].source_name == correction
    assert [e.process_id for e in stack.events("reply_received")] == [first]
    assert not stack.events("proposal_accepted")
    run_until(stack, compared(stack, 2), "two turns", proposer="llm", url=model.url, timeout=90)
    checkpoints = [c.get("index") for c in stack.events("round_robin_checkpoint")]
    assert checkpoints[:3] == [0, 0, 1]
    started = stack.events("conversation_started")
    assert [c.parameter for c in started[:3]] == ["hidden_size", "hidden_size", "sequence_length"]
    accepted = stack.events("proposal_accepted")
    assert [a.get("parameter") for a in accepted[:2]] == ["hidden_size", "sequence_length"]
    assert check_history(stack).steps[:2] == [0, 1]


def test_crash_after_acceptance_before_the_reply_advances_exactly_once(stack: Stack) -> None:
    """The broker accepted but the reply was lost: that run is finished, the turn moves on."""
    stack.start()
    stack.crash_at("after_tool_accepted")
    (accepted,) = stack.events("proposal_accepted")
    assert not stack.events("conversation_ended")
    run_until(stack, compared(stack, 2), "two turns", timeout=90)
    started = stack.events("conversation_started")
    assert [c.parameter for c in started[:2]] == ["hidden_size", "sequence_length"]
    assert [p.get("parameter") for p in stack.events("proposal_accepted")[:2]] == [
        "hidden_size",
        "sequence_length",
    ]
    first_compare = stack.events("configuration_compared")[0]
    assert first_compare.process_id == accepted.get("run_id")
    assert check_history(stack).steps[:2] == [0, 1]


def test_crash_while_waiting_for_a_proposal_run_finishes_it_once(stack: Stack) -> None:
    """Killed while waiting: the restart waits, compares and decides exactly once."""
    stack.start()
    stack.crash_at("waiting")
    assert not stack.events("configuration_compared")
    run_until(stack, compared(stack, 2), "two turns", timeout=90)
    assert check_history(stack).steps[:2] == [0, 1]


def test_crash_between_comparison_and_promotion_promotes_once(stack: Stack) -> None:
    """Killed after the comparison is stored: the promotion happens once, after the restart."""
    # A default hidden size that collapses on the surrogate: any other value wins.
    stack.use_schema(narrowed_schema({"model.hidden_size": {"default": 128}}))
    stack.start()
    stack.crash_at("after_comparison")
    (compare,) = stack.events("configuration_compared")
    assert compare.get("decision") == "promoted"
    assert len(stack.events("golden_config_created")) == 1
    run_until(stack, compared(stack, 2), "two turns", timeout=90)
    summary = check_history(stack)
    promotions = [g for g in summary.goldens if g.parent == compare.event_id]
    assert len(promotions) == 1 and promotions[0].get("run_id") == compare.process_id
    assert summary.compared[1].get("current_golden_run_id") == compare.process_id


# A seed rotation after every stagnant cycle.
ROTATING = {"AX3L_SEED_STAGNANT_ROUNDS": "1"}


def crash_in_rotation(stack: Stack, point: str) -> None:
    """On the tiny schema, rotating after every stagnant cycle, killed at ``point``."""
    stack.use_schema(tiny_schema())
    stack.start()
    stack.crash_at(point, env=ROTATING)


def rotation_submissions(stack: Stack) -> list[Any]:
    return [e for e in stack.events("simulation_submitted") if e.source_name == "SeedRotation"]


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_crash_after_the_rotation_started_finishes_that_rotation(stack: Stack) -> None:
    """Killed right after seed_rotation_started: the rotation is completed once."""
    crash_in_rotation(stack, "rotation_started")
    assert len(stack.events("seed_rotation_started")) == 1
    run_until(stack, seed_golden(stack, 1972), "two rotations", env=ROTATING, timeout=90)
    check_rotations(stack)


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_crash_after_the_rotation_submit_finds_that_run(stack: Stack) -> None:
    """Killed between submitting the baseline and recording it: the run is found, not resent."""
    crash_in_rotation(stack, "rotation_after_submit")
    run_until(stack, seed_golden(stack, 1971), "the seed 1971 baseline", env=ROTATING, timeout=90)
    assert rotation_submissions(stack)[0].get("reused") is True
    check_rotations(stack)


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_crash_while_waiting_for_the_rotation_run_resumes_it(stack: Stack) -> None:
    """Killed while waiting for the baseline run: the restart waits for the same run."""
    crash_in_rotation(stack, "rotation_waiting")
    run_until(stack, seed_golden(stack, 1972), "two rotations", env=ROTATING, timeout=90)
    assert rotation_submissions(stack)[0].get("reused") is False
    check_rotations(stack)


def check_rotations(stack: Stack) -> None:
    """Each rotation: one increment, one baseline run, one baseline golden, at a cycle's end."""
    summary = check_history(stack)
    events = stack.events()
    for rotation in (e for e in events if e.name == "seed_rotation_started"):
        children = [e for e in events if e.parent == rotation.event_id]
        names = sorted(e.name for e in children)
        assert names.count("golden_config_seed_incremented") == 1
        assert names.count("simulation_submitted") == 1
        assert names.count("golden_config_created") <= 1
        steps_before = [
            e
            for e in events
            if e.name in ("configuration_compared", "parameter_space_exhausted")
            and e.event_id < rotation.event_id
        ]
        assert len(steps_before) % 7 == 0, "rotations happen between cycles"
        assert rotation.get("stagnant_cycles") == 1
    baselines = [g for g in summary.goldens if g.get("kind") == "seed_rotation"]
    assert [g.get("seed") for g in baselines] == list(range(1971, 1971 + len(baselines)))
