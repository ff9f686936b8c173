"""A run failed at the run deadline before its first episode is retried as a new run.

SnakeLab's row of such a run still says ``running`` (SnakeLab could not store its end: a full
disk under the database does this), so the retry must not take that row for a usable run of the
configuration: it did, once, and recorded the failed run as its own retry three times over.
"""

from __future__ import annotations

import pytest
from orchestrator_stack import compared, killed_while_waiting, retries, set_run

from ax3l.testing.stack import Stack, check_history


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_a_run_failed_at_the_deadline_is_not_its_own_retry(stack: Stack) -> None:
    """The stuck run is failed at the deadline as never trained; its retry is a new run of the
    same configuration, each run has one ``simulation_submitted``, and the history holds."""
    env = {"AX3L_RUN_DEADLINE_SECONDS": "3"}
    _, stuck = killed_while_waiting(stack, **env)
    stack.restart_snakelab()  # SnakeLab forgets the run: its table is what the loop reads
    unfinished = {"status": "running", "episode_count": None, "high_score": None}
    set_run(stack, stuck, **unfinished, completed_at=None, episodes=False)
    proc = stack.orchestrator("random", env=env)
    stack.wait_for(lambda: retries(stack), 60, "the retry", proc)
    stack.wait_for(compared(stack), 60, "the step to complete", proc)
    proc.stop()

    submitted = [e.process_id for e in stack.events("simulation_submitted")]
    assert submitted.count(stuck) == 1, submitted
    retry = retries(stack)[0]
    assert retry.get("retry_of") == stuck and retry.process_id != stuck, retry.content
    (failed,) = [e for e in stack.events("simulation_failed") if e.process_id == stuck]
    assert failed.get("timed_out") is True, failed.content
    check_history(stack)
