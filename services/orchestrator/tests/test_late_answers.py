"""A SnakeLab that answers a submission late never costs a run or a step.

SnakeLab here is the reference one behind ``stalling_snakelab``: it stores the proposal's run at
once and answers 4 s (or 6 s) later, after the broker's 3 s timeout, as a SnakeLab does that
reads a request and then stalls (swap, a slow disk). The run is that step's one run: adopted,
waited for and compared exactly once, and the turn is never asked a second time.
"""

from __future__ import annotations

from collections import Counter

from orchestrator_stack import compared, run_until

from ax3l.testing.stack import Stack, check_history
from ax3l.testing.zmq_peer import nth_submit, stalling_snakelab

# The first submit is the seeding run's (the orchestrator's own); the second is the first
# proposal's, sent by the broker.
FIRST_PROPOSAL = 2


def late_snakelab(seconds: float):
    return lambda endpoint: stalling_snakelab(endpoint, nth_submit(FIRST_PROPOSAL, seconds))


def step_runs(stack: Stack) -> dict[str, int]:
    """How the late step went: runs SnakeLab created for the first turn (hidden_size), and the
    proposals accepted, adopted and compared for it."""
    proposals = stack.events("proposal_accepted")
    others = {e.process_id for e in proposals if e.parameter != "hidden_size"}
    first_turn = [r for r in stack.runs()[1:] if r["run_id"] not in others]
    accepted = [e for e in proposals if e.parameter == "hidden_size"]
    compared = {e.process_id for e in stack.events("configuration_compared")}
    return {
        "runs": len(first_turn),
        "accepted": len(accepted),
        "adopted": sum(1 for e in accepted if e.get("adopted")),
        "compared": sum(1 for e in accepted if e.process_id in compared),
    }


def assert_each_accepted_run_compared_once(stack: Stack) -> None:
    """Every accepted proposal's run is compared once; no checkpoint has two proposals."""
    compared = Counter(e.process_id for e in stack.events("configuration_compared"))
    accepted = stack.events("proposal_accepted")
    assert all(compared[e.process_id] == 1 for e in accepted[:-1]), (accepted, compared)
    per_checkpoint = Counter(e.get("checkpoint_event_id") for e in accepted)
    assert max(per_checkpoint.values()) == 1, per_checkpoint


def test_a_submission_answered_after_the_timeout_is_the_steps_run(stack: Stack) -> None:
    """SnakeLab stores the run and answers 4 s later: the broker waits for it to answer again,
    adopts the run and accepts the proposal, so the conversation succeeds and its run is compared
    once; SnakeLab holds one run for the step."""
    stack.start(front=late_snakelab(4.0))
    run_until(stack, compared(stack, 3), "three steps", timeout=120)
    assert step_runs(stack) == {"runs": 1, "accepted": 1, "adopted": 1, "compared": 1}
    assert not stack.events("tool_execution_failed")
    assert_each_accepted_run_compared_once(stack)
    check_history(stack)


def test_a_late_answer_beyond_the_brokers_wait_is_settled_before_the_turn_is_asked_again(
    stack: Stack,
) -> None:
    """SnakeLab answers 6 s late and the broker gives up waiting after 0.5 s: the conversation
    fails with the outcome unknown, and the orchestrator waits for SnakeLab before it asks the
    turn again, finds the run and compares it as that step's run; no second run is made."""
    stack.broker_env = {"AX3L_SUBMIT_SETTLE_WAIT": "0.5"}
    stack.start(front=late_snakelab(6.0))
    run_until(stack, compared(stack, 3), "three steps", timeout=120)
    assert step_runs(stack) == {"runs": 1, "accepted": 1, "adopted": 1, "compared": 1}
    (failed,) = stack.events("tool_execution_failed")
    assert "state is unknown" in str(failed.content)
    checkpoints = [c.get("index") for c in stack.events("round_robin_checkpoint")]
    assert checkpoints[:2] == [0, 1], checkpoints  # hidden_size was asked once
    assert_each_accepted_run_compared_once(stack)
    check_history(stack)
