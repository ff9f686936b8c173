"""Bounded waiting and infrastructure retries: baselines that keep failing stop the loop, a run
that never turns terminal fails at the deadline, and a run SnakeLab failed before its first
episode is run again as the same step, never twice per attempt across crashes.

SnakeLab's outcome is set in its tables after a SnakeLab restart (which makes SnakeLab forget the
run, so the tables are what the orchestrator reads), the way a real outage leaves them.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from orchestrator_stack import compared, killed_while_waiting, retries, run_until, set_run

from ax3l.testing.stack import Stack, check_history, tiny_schema

NEVER_TRAINED = {
    "status": "failed",
    "episode_count": None,
    "high_score": None,
    "started_at": None,
    "error_message": "Lost connection to MySQL server during query",
    "episodes": False,
}


def fail_before_first_episode(stack: Stack, run_id: str) -> None:
    stack.restart_snakelab()
    set_run(stack, run_id, **NEVER_TRAINED)


def runs_of(stack: Stack, run_id: str) -> list[dict[str, Any]]:
    """SnakeLab's runs with the same configuration as ``run_id``, oldest first."""
    runs = stack.runs()
    (model,) = [r for r in runs if r["run_id"] == run_id]
    columns = [c for c in model if c not in ("run_id", "status", "high_score")]
    return [r for r in runs if all(r[c] == model[c] for c in columns)]


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_a_run_that_never_trained_is_retried_as_the_same_step(stack: Stack) -> None:
    """A proposal run failed before its first episode is resubmitted once, and the retry completes
    the step in its place."""
    accepted, failed_run = killed_while_waiting(stack)
    fail_before_first_episode(stack, failed_run)
    run_until(stack, compared(stack, 2), "two steps")

    (retry,) = retries(stack)
    assert retry.source_name == "InfraRetry" and retry.level == "WARNING"
    assert retry.parent == accepted.event_id and retry.get("retry_of") == failed_run
    assert retry.get("attempt") == 2 and retry.get("reused") is False
    assert retry.get("proposal_run_id") == failed_run
    (failed,) = [e for e in stack.events("simulation_failed") if e.process_id == failed_run]
    assert failed.get("never_trained") is True
    summary = check_history(stack)
    first = summary.compared[0]
    assert first.process_id == retry.process_id and first.get("index") == 0
    assert first.get("proposal_run_id") == failed_run
    assert not [c for c in summary.compared if c.process_id == failed_run]
    assert summary.steps[:2] == [0, 1]
    assert [r["run_id"] for r in runs_of(stack, failed_run)] == [failed_run, retry.process_id]


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_a_crash_right_after_the_retry_submit_records_that_run_and_submits_nothing_more(
    stack: Stack,
) -> None:
    """Killed between resubmitting and recording the retry: the restart adopts the stored run
    instead of submitting the configuration a third time."""
    _, failed_run = killed_while_waiting(stack)
    fail_before_first_episode(stack, failed_run)
    stack.crash_at("retry_after_submit")
    assert not retries(stack) and len(runs_of(stack, failed_run)) == 2
    run_until(stack, compared(stack), "a step")

    (retry,) = retries(stack)
    assert retry.get("reused") is True and retry.get("attempt") == 2
    assert [r["run_id"] for r in runs_of(stack, failed_run)] == [failed_run, retry.process_id]
    assert stack.events("configuration_compared")[0].process_id == retry.process_id
    check_history(stack)


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_retries_stop_at_the_budget_and_the_step_completes_as_failed(stack: Stack) -> None:
    """With AX3L_INFRA_RETRY_MAX=1 a retry that also never trained completes the step as a
    failed comparison, and nothing is submitted a third time."""
    env = {"AX3L_INFRA_RETRY_MAX": "1"}
    _, failed_run = killed_while_waiting(stack, **env)
    fail_before_first_episode(stack, failed_run)
    # The restart polls the failed run (first "waiting"), retries, then waits for the retry.
    stack.crash_at("waiting@2", env=env)
    (retry,) = retries(stack)
    fail_before_first_episode(stack, str(retry.process_id))
    run_until(stack, compared(stack, 2), "two steps", env=env)

    assert len(retries(stack)) == 1 and len(runs_of(stack, failed_run)) == 2
    summary = check_history(stack)
    first = summary.compared[0]
    assert first.process_id == retry.process_id and first.get("decision") == "failed"
    assert first.get("never_trained") is True and first.get("index") == 0
    assert summary.steps[:2] == [0, 1]


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_a_seeding_run_completed_without_a_score_runs_again(stack: Stack) -> None:
    """A seeding run SnakeLab reports completed without a high score counts as failed: the
    defaults run a second time and that run becomes the first golden."""
    stack.start()
    stack.crash_at("seeding_waiting")
    (first_run,) = stack.runs()
    stack.restart_snakelab()
    set_run(stack, first_run["run_id"], status="completed", high_score=None, episode_count=1500)
    run_until(stack, lambda: stack.count("golden_config_created"), "the first golden")

    seeding = [e for e in stack.events("simulation_submitted") if e.source_name == "InitialSeeding"]
    assert [e.get("attempt") for e in seeding] == [1, 2]
    assert seeding[1].get("retry_of") == first_run["run_id"]
    assert seeding[1].get("infrastructure_failure") is False
    golden = stack.events("golden_config_created")[0]
    assert golden.get("run_id") == seeding[1].process_id != first_run["run_id"]
    check_history(stack)


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_a_seeding_run_that_keeps_failing_stops_the_loop_naming_the_run_and_its_error(
    stack: Stack,
) -> None:
    """Past AX3L_BASELINE_MAX_ATTEMPTS the loop stops with the run and its error, and a restart
    counts the same stored attempts and submits nothing."""
    env = {"AX3L_BASELINE_MAX_ATTEMPTS": "1"}
    stack.start()
    stack.crash_at("seeding_waiting", env=env)
    (first_run,) = stack.runs()
    run_id = first_run["run_id"]
    stack.restart_snakelab()
    set_run(stack, run_id, status="failed", episode_count=12, high_score=1, error_message="boom")
    for _ in range(2):
        proc = stack.orchestrator("random", env=env)
        assert proc.wait(60) == 1, proc.log_tail()
        output = proc.log_tail(200)
        assert "the loop stopped" in output and run_id in output and "boom" in output
        assert "AX3L_BASELINE_MAX_ATTEMPTS=1" in output
        assert [r["run_id"] for r in stack.runs()] == [run_id]
    assert not stack.events("golden_config_created")


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_a_seed_baseline_that_keeps_failing_stops_the_loop(stack: Stack) -> None:
    """A rotation's baseline run that failed after training, with no attempts left, stops the
    loop naming that run; the rotation is not submitted again."""
    stack.use_schema(tiny_schema())
    env = {"AX3L_SEED_STAGNANT_ROUNDS": "1", "AX3L_BASELINE_MAX_ATTEMPTS": "1"}
    stack.start()
    stack.crash_at("rotation_waiting", env=env)
    (record,) = [e for e in stack.events("simulation_submitted") if e.source_name == "SeedRotation"]
    stack.restart_snakelab()
    set_run(stack, str(record.process_id), status="cancelled", episode_count=40, high_score=3)
    runs_before = len(stack.runs())
    proc = stack.orchestrator("random", env=env)
    assert proc.wait(60) == 1, proc.log_tail()
    output = proc.log_tail(200)
    assert "seed 1971 baseline run" in output and str(record.process_id) in output
    assert len(stack.runs()) == runs_before


def test_a_run_that_never_turns_terminal_fails_at_the_deadline(stack: Stack) -> None:
    """A run SnakeLab's table keeps 'running' for ever is logged as failed once the deadline
    since its submission passed, and the step completes as failed."""
    env = {"AX3L_RUN_DEADLINE_SECONDS": "3"}
    _, run_id = killed_while_waiting(stack, **env)
    stack.restart_snakelab()
    set_run(stack, run_id, status="running", episode_count=5, high_score=1, completed_at=None)
    run_until(stack, compared(stack), "a step", env=env)

    (failed,) = [e for e in stack.events("simulation_failed") if e.process_id == run_id]
    assert failed.get("timed_out") is True and "not terminal 3 s after" in failed.get("error")
    assert failed.get("never_trained") is None
    first = stack.events("configuration_compared")[0]
    assert first.process_id == run_id and first.get("decision") == "failed"
    assert not retries(stack)


def insert_event(stack: Stack, name: str, content: dict[str, Any], **columns: Any) -> int:
    with stack._cursor() as cur:
        cur.execute(
            "INSERT INTO events (occurred_at, name, category, log_level, process_id, parameter)"
            " VALUES (%s, %s, 'Configuration', 'INFO', %s, %s)",
            (
                datetime.now(UTC).replace(tzinfo=None),
                name,
                columns.get("process_id"),
                columns.get("parameter"),
            ),
        )
        event_id = int(cur.lastrowid)
        cur.execute(
            "INSERT INTO event_messages (event_id, content) VALUES (%s, %s)",
            (event_id, json.dumps(content)),
        )
    return event_id


def test_a_proposal_for_another_checkpoint_is_neither_finished_nor_moves_the_turn(
    stack: Stack,
) -> None:
    """A proposal_accepted naming an older checkpoint, written after the latest one, is ignored:
    the turn asks again and completes with its own proposal."""
    stack.start()
    stack.crash_at("after_checkpoint")
    (checkpoint,) = stack.events("round_robin_checkpoint")
    stray_run = str(uuid.uuid4())
    insert_event(
        stack,
        "proposal_accepted",
        {"parameter": "hidden_size", "run_id": stray_run, "checkpoint_event_id": 1},
        process_id=stray_run,
        parameter="hidden_size",
    )
    assert checkpoint.event_id != 1
    run_until(stack, compared(stack, 2), "two steps")

    summary = check_history(stack)
    assert stray_run not in {c.process_id for c in summary.compared}
    assert not [
        e for e in stack.events() if e.process_id == stray_run and e.name != "proposal_accepted"
    ]
    assert summary.steps[:2] == [0, 1]
    own = [p for p in stack.events("proposal_accepted") if p.process_id != stray_run]
    assert own[0].get("parameter") == "hidden_size"
    assert summary.compared[0].process_id == own[0].get("run_id")
