"""Exhaustion skips and seed rotation, on schemas narrowed so that domains run out quickly."""

from __future__ import annotations

from typing import Any

from ax3l.testing.stack import (
    FIXED_EXCEPT_HIDDEN_SIZE,
    Stack,
    check_history,
    narrowed_schema,
    tiny_schema,
)

# Only hidden size is tunable ({208, 224}); everything else has one legal value, so those
# entries are exhausted at once and a cycle costs at most one run.
TINY = tiny_schema()


def completions(stack: Stack) -> list[Any]:
    return stack.events("configuration_compared", "parameter_space_exhausted")


def wait_for_steps(stack: Stack, steps: int, what: str, proc: Any) -> None:
    """Wait until ``steps`` steps are complete (compared or skipped as exhausted)."""
    stack.wait_for(lambda: len(completions(stack)) >= steps, 90, what, proc)


def test_exhausted_entries_are_skipped_counted_and_stay_skipped_after_a_restart(
    stack: Stack,
) -> None:
    """Finite entries with every choice run on this seed are skipped and complete their step."""
    stack.use_schema(TINY)
    stack.start()
    env = {"AX3L_SEED_STAGNANT_ROUNDS": "100"}
    proc = stack.orchestrator("random", env=env)
    wait_for_steps(stack, 14, "two cycles", proc)
    assert stack.status()["cycles"] >= 1
    proc.kill()
    proc = stack.orchestrator("random", env=env)
    wait_for_steps(stack, 24, "three more steps", proc)
    status = stack.status()
    proc.stop()

    summary = check_history(stack)
    events = completions(stack)
    kinds = [(e.name, e.get("index")) for e in events]
    assert kinds[:7] == [("configuration_compared", 0)] + [
        ("parameter_space_exhausted", i) for i in range(1, 7)
    ]
    assert all(name == "parameter_space_exhausted" for name, _ in kinds[7:])
    hidden = [e for e in events[7:] if e.get("index") == 0]
    assert hidden and all(e.get("choices") == 2 and e.get("seed") == 1970 for e in hidden)
    assert status["cycles"] >= 3 and status["stagnant_cycles"] == status["cycles"]
    assert len(stack.runs()) == 2  # the seeding run and hidden size 208: nothing ran twice
    assert not stack.events("conversation_started")[1:], "no conversation for exhausted entries"
    assert summary.steps == [i % 7 for i in range(len(summary.steps))]


def test_continuous_entries_are_never_exhausted(stack: Stack) -> None:
    """Learning rate (a continuous range) gets a proposal every cycle; fixed entries never do."""
    schema = narrowed_schema(
        {
            **FIXED_EXCEPT_HIDDEN_SIZE,
            "model.hidden_size": {"const": 224},
            "training.learning_rate": {"minimum": 0.001, "maximum": 0.004},
        }
    )
    stack.use_schema(schema)
    stack.start()
    proc = stack.orchestrator("random", env={"AX3L_SEED_STAGNANT_ROUNDS": "100"})
    wait_for_steps(stack, 21, "three cycles", proc)
    proc.stop()
    check_history(stack)
    compared = [
        e.get("index") for e in completions(stack)[:21] if e.name == "configuration_compared"
    ]
    assert compared == [3, 3, 3]


def test_nine_stagnant_cycles_rotate_the_seed_and_rerun_the_golden_as_baseline(
    stack: Stack,
) -> None:
    """After 9 stagnant cycles: seed + 1, golden rerun as the new baseline even when lower."""
    stack.use_schema(TINY)
    stack.start()
    proc = stack.orchestrator("random")

    def second_rotation_done() -> bool:
        return any(g.get("seed") == 1972 for g in stack.events("golden_config_created"))

    stack.wait_for(second_rotation_done, 150, "two seed rotations", proc)
    proc.stop()
    summary = check_history(stack)
    events = stack.events()
    rotations = [e for e in events if e.name == "seed_rotation_started"]
    assert [r.get("seed") for r in rotations[:2]] == [1971, 1972]
    assert all(r.get("stagnant_cycles") == 9 for r in rotations[:2])
    assert rotations[0].get("config")["seed"] == 1971
    assert rotations[0].get("config")["model"] == summary.goldens[0].get("config")["model"]

    # Rotation 1 came after exactly 9 cycles: 63 steps (one run, 62 skips).
    steps_before = [
        e
        for e in events
        if e.name in ("configuration_compared", "parameter_space_exhausted")
        and e.event_id < rotations[0].event_id
    ]
    assert len(steps_before) == 63

    goldens = [(g.get("kind"), g.get("seed"), g.get("high_score")) for g in summary.goldens]
    seeding, baseline = goldens[0], goldens[1]
    assert seeding[0] == "seeding" and baseline[:2] == ("seed_rotation", 1971)
    assert baseline[2] < seeding[2], "the surrogate scores the defaults lower on seed 1971"
    incremented = [e for e in events if e.name == "golden_config_seed_incremented"]
    assert [e.parent for e in incremented[:2]] == [r.event_id for r in rotations[:2]]
    rotation_runs = [
        e for e in events if e.name == "simulation_submitted" and e.source_name == "SeedRotation"
    ]
    assert [e.parent for e in rotation_runs[:2]] == [r.event_id for r in rotations[:2]]

    # On the new seed hidden size is tunable again: earlier seeds do not exhaust it.
    after_first = [e for e in summary.compared if e.event_id > rotations[0].event_id]
    assert after_first and after_first[0].get("seed") == 1971 and after_first[0].get("index") == 0
    # That cycle improved (208 beats the 1971 baseline), so it did not count as stagnant:
    # the second rotation waited for 9 cycles after the promotion.
    promoted = [g for g in summary.goldens if g.get("kind") == "promotion"]
    assert promoted and promoted[0].get("seed") == 1971
    between = [
        e
        for e in events
        if e.name in ("configuration_compared", "parameter_space_exhausted")
        and promoted[0].event_id < e.event_id < rotations[1].event_id
    ]
    assert len(between) == 6 + 9 * 7
