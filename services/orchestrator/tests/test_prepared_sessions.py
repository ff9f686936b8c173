"""Sessions ready before they are needed, end to end: while a run trains, the next entry's MCP
child already runs, bound to it, and its conversation takes it over; killing the orchestrator
then leaks no child, and the restart continues the experiment with fresh sessions."""

from __future__ import annotations

import pytest

from ax3l.shared.processes import process_alive
from ax3l.shared.registry import ENTRIES
from ax3l.testing.mcp_children import mcp_children
from ax3l.testing.stack import Stack, check_history

RUN_SECONDS = 4.0


def prepared_while_waiting(stack: Stack, pid: int) -> dict[int, str] | None:
    """While the first proposal's run trains: the orchestrator's children, once they are the
    next entry's alone (the first conversation's has closed)."""
    if stack.count("configuration_compared") or not stack.count("proposal_accepted"):
        return None
    children = mcp_children(pid)
    return children if list(children.values()) == [ENTRIES[1].name] else None


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_the_next_entrys_session_is_started_during_the_wait_and_used(stack: Stack) -> None:
    """During the first turn's run a child bound to the second entry runs; the second
    conversation uses that prepared session and no unused child is left behind."""
    stack.start(surrogate_seconds=RUN_SECONDS)
    proc = stack.orchestrator("random")
    children = stack.wait_for(
        lambda: prepared_while_waiting(stack, proc.popen.pid), 90, "a prepared session", proc
    )
    stack.wait_for(lambda: stack.count("configuration_compared") >= 2, 120, "two turns", proc)
    proc.stop()
    ended = [e for e in stack.events("conversation_ended") if e.get("outcome") == "accepted"]
    sessions = [e.get("mcp_sessions") for e in ended[:2]]
    assert [len(s) for s in sessions] == [1, 1]
    assert sessions[1][0]["prepared"] is True
    assert sessions[1][0]["wait_seconds"] < sessions[1][0]["spawn_seconds"]
    assert not [pid for pid in children if process_alive(pid)]
    assert check_history(stack).steps[:2] == [0, 1]


@pytest.mark.long  # minutes of the default suite's 15 (make test-long)
def test_killing_the_orchestrator_with_a_prepared_session_leaks_no_child(stack: Stack) -> None:
    """SIGKILL while a prepared session waits: its child exits (stdin closed), the restart
    starts its own sessions and the experiment goes on without a repeated or skipped step."""
    stack.start(surrogate_seconds=RUN_SECONDS)
    first = stack.orchestrator("random")
    children = stack.wait_for(
        lambda: prepared_while_waiting(stack, first.popen.pid), 90, "a prepared session", first
    )
    first.kill()
    stack.wait_for(
        lambda: not [pid for pid in children if process_alive(pid)],
        30,
        "the orphaned children gone",
    )
    second = stack.orchestrator("random")
    stack.wait_for(lambda: stack.count("configuration_compared") >= 3, 180, "three turns", second)
    own = mcp_children(second.popen.pid)
    assert not set(own) & set(children)
    second.stop()
    stack.wait_for(lambda: not [pid for pid in own if process_alive(pid)], 30, "its children gone")
    summary = check_history(stack)
    assert summary.steps[:3] == [0, 1, 2]
    ended = [e for e in stack.events("conversation_ended") if e.get("outcome") == "accepted"]
    assert [e.parameter for e in ended[:3]] == [entry.name for entry in ENTRIES[:3]]
