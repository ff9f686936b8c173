"""Waiting for runs: runs lost by SnakeLab, and SnakeLab being unreachable."""

from __future__ import annotations

import pytest
from orchestrator_stack import compared, killed_while_waiting, run_until, status_or_none

from ax3l.shared.stack.spec import http_get
from ax3l.testing.databases import TestDatabases, create_snakelab_tables
from ax3l.testing.plugin import free_port
from ax3l.testing.stack import Stack, check_history


def _trained(stack: Stack) -> bool:
    """The first proposal's run has stored an episode (it is a tested configuration)."""
    accepted = stack.events("proposal_accepted")
    if not accepted:
        return False
    with stack._cursor() as cur:
        cur.execute(
            f"SELECT episode_count FROM `{stack.databases.snakelab_db}`.simulation_runs"
            " WHERE run_id = %s",
            (accepted[0].get("run_id"),),
        )
        row = cur.fetchone()
    return bool(row and row[0])


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_a_run_lost_in_a_snakelab_restart_is_logged_and_the_turn_moves_on(stack: Stack) -> None:
    """SnakeLab forgets a run that trained (run_not_found); its table says failed; no promotion,
    next turn (a run lost before its first episode is retried instead: test_bounded_waiting)."""
    stack.start(surrogate_seconds=4)
    proc = stack.orchestrator("random")
    stack.wait_for(lambda: _trained(stack), 60, "a proposal run with an episode", proc)
    stack.restart_snakelab()
    stack.wait_for(compared(stack, 2), 60, "the next turn", proc)
    proc.stop()

    summary = check_history(stack)
    lost, following = summary.compared[:2]
    assert lost.level == "WARNING" and lost.get("decision") == "failed"
    # The event reports the table's partial high score, if an episode finished before the kill.
    (row,) = [r for r in stack.runs() if r["run_id"] == lost.get("latest_run_id")]
    assert row["status"] == "failed"
    assert lost.get("state") == "failed" and lost.get("high_score") == row["high_score"]
    assert "Run failed" in lost.get("reason")
    (failed,) = [e for e in stack.events("simulation_failed") if e.process_id == lost.process_id]
    assert "Server stopped before run completed" in failed.get("error")
    (retained,) = [e for e in stack.events("golden_config_retained") if e.parent == lost.event_id]
    assert retained.level == "WARNING"
    assert following.get("index") == 1 and len(summary.goldens) == 1


def test_missing_snakelab_tables_and_an_unreachable_snakelab_are_waited_out(
    databases: TestDatabases, stack: Stack
) -> None:
    """Before SnakeLab exists the loop waits (tables, then the socket); /ready says why."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    proc = stack.orchestrator(
        "random", env={"AX3L_SNAKELAB_ENDPOINT": endpoint, "AX3L_SNAKELAB_TIMEOUT": "0.3"}
    )
    base = f"http://127.0.0.1:{stack.api_port}"
    status = stack.wait_for(lambda: _status_with_error(stack, "tables"), 30, "a wait", proc)
    assert status["phase"] == "starting"
    create_snakelab_tables(databases)
    status = stack.wait_for(
        lambda: _status_with_error(stack, "did not answer"), 30, "seeding", proc
    )
    assert status["phase"] == "seeding"
    code, ready = http_get(f"{base}/ready", timeout=5)
    assert code == 503 and ready["status"] == "not ready"
    assert ready["checks"] == {"database": True, "snakelab": False, "loop": True}
    [problem] = ready["problems"]
    assert problem.startswith("snakelab: ")
    assert proc.alive() and not stack.events()


def _status_with_error(stack: Stack, text: str) -> dict | None:
    status = status_or_none(stack)
    return status if status and text in (status.get("last_error") or "") else None


def test_a_vanished_run_is_logged_as_failed_and_its_step_retried(stack: Stack) -> None:
    """A run neither SnakeLab nor its tables know any more tested nothing: it is logged as
    vanished and its configuration runs again as the same step."""
    accepted, run_id = killed_while_waiting(stack)
    stack.restart_snakelab()  # forgets the run...
    with stack._cursor() as cur:  # ...and its row goes too, as if SnakeLab's tables were reset
        cur.execute(
            f"DELETE FROM `{stack.databases.snakelab_db}`.simulation_runs WHERE run_id = %s",
            (run_id,),
        )
    run_until(stack, compared(stack, 2), "the next turn")

    summary = check_history(stack)
    (failed,) = [e for e in stack.events("simulation_failed") if e.process_id == run_id]
    assert failed.get("state") == "vanished" and failed.get("never_trained") is True
    (retry,) = [e for e in stack.events("simulation_submitted") if e.get("retry_of") == run_id]
    assert retry.get("attempt") == 2 and retry.parent == accepted.event_id
    first = summary.compared[0]
    assert first.process_id == retry.process_id and first.get("index") == 0
    assert run_id not in {c.process_id for c in summary.compared}
    assert summary.compared[1].get("index") == 1
