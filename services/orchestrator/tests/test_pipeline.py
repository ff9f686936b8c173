"""Pipelined proposals (AX3L_PIPELINE=on): the next turn's conversation runs while a run trains,
its tool call is held until that turn's checkpoint, and nothing of it survives a restart."""

from __future__ import annotations

import signal
from typing import Any

import pytest
from orchestrator_stack import status_or_none

from ax3l.testing.invariants import Ev
from ax3l.testing.scripted_llm import random_call_ranges
from ax3l.testing.stack import Stack, check_history

RUN_SECONDS = 3.0
PIPELINE = {"AX3L_PIPELINE": "on", "AX3L_LLM_FALLBACK": "none"}


def _pipelined(stack: Stack) -> dict[str, Any] | None:
    """The status API's ``pipelined`` (None while the orchestrator is not answering)."""
    held = (status_or_none(stack) or {}).get("pipelined")
    return held if isinstance(held, dict) else None


def _by_conversation(events: list[Ev], name: str) -> dict[str, Ev]:
    return {e.process_id: e for e in events if e.name == name and e.process_id}


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_pipelined_calls_wait_for_their_checkpoint_and_the_history_stays_whole(
    stack: Stack,
) -> None:
    """While a run trains, the next turn's conversation starts (pipelined, no checkpoint yet);
    its tool call reaches the broker only after that turn's checkpoint, the proposal names that
    checkpoint, the status API shows the held conversation, and the history keeps every
    invariant."""
    stack.start(surrogate_seconds=RUN_SECONDS)
    model = stack.start_model({"then": {"random_call": random_call_ranges()}})
    proc = stack.orchestrator("llm", url=model.url, env=PIPELINE)
    seen_held: list[dict[str, object]] = []

    def progressed() -> bool:
        held = _pipelined(stack)
        if held is not None:
            seen_held.append(held)
        return stack.count("conversation_resumed") >= 4

    # Four resumed, so the first three have surely ended (the last may still be running).
    stack.wait_for(progressed, 150, "four pipelined turns", proc)
    proc.stop()

    events = stack.events()
    position = {e.event_id: i for i, e in enumerate(events)}
    checkpoints = {e.event_id: e for e in events if e.name == "round_robin_checkpoint"}
    started = _by_conversation(events, "conversation_started")
    resumed = [e for e in events if e.name == "conversation_resumed"]
    assert len(resumed) >= 4
    for event in resumed[:3]:
        opened = started[str(event.process_id)]
        assert opened.get("pipelined") is True and opened.get("checkpoint_event_id") is None
        checkpoint = checkpoints[event.get("checkpoint_event_id")]
        # Started before its turn's checkpoint existed, handed the turn after it.
        assert position[opened.event_id] < position[checkpoint.event_id] < position[event.event_id]
        assert checkpoint.get("index") == opened.get("index") == event.get("index")
        assert event.get("call_held") is True and event.get("held_seconds") >= 0
        # Its call reached the broker only after the checkpoint (the broker logs the request).
        requests = [
            e
            for e in events
            if e.name == "tool_request_received" and e.parameter == opened.parameter
            and position[e.event_id] > position[opened.event_id]
        ]  # fmt: skip
        assert requests and position[requests[0].event_id] > position[checkpoint.event_id]
        accepted = [
            e
            for e in events
            if e.name == "proposal_accepted" and e.get("checkpoint_event_id") == checkpoint.event_id
        ]
        assert len(accepted) == 1
        ended = [
            e for e in events if e.name == "conversation_ended" and e.process_id == event.process_id
        ]
        assert [e.get("outcome") for e in ended] == ["accepted"]
        assert ended[0].get("pipelined") is True
    assert any(s.get("state") == "held" for s in seen_held), seen_held
    check_history(stack)


@pytest.mark.long  # minutes of the default suite's 15 (make test-long)
def test_a_kill_while_a_call_is_held_asks_the_turn_again_after_the_restart(stack: Stack) -> None:
    """SIGKILL of the orchestrator while a pipelined call is held loses nothing: the restarted
    orchestrator asks that turn again, exactly one proposal is accepted for it, and the
    history keeps every invariant."""
    stack.start(surrogate_seconds=6.0)
    model = stack.start_model({"then": {"random_call": random_call_ranges()}})
    proc = stack.orchestrator("llm", url=model.url, env=PIPELINE)

    found: list[dict[str, Any]] = []

    def holding() -> bool:
        held = _pipelined(stack)
        if held is not None and held.get("state") == "held":
            found.append(held)
        return bool(found)

    stack.wait_for(holding, 90, "a held pipelined call", proc)
    held_conversation = found[0]
    proc.popen.send_signal(signal.SIGKILL)
    proc.wait(10)
    accepted_before = stack.count("proposal_accepted")

    proc = stack.orchestrator("llm", url=model.url, env=PIPELINE)
    stack.wait_for(
        lambda: stack.count("configuration_compared") >= accepted_before + 1,
        120,
        "the next turns after the restart",
        proc,
    )
    proc.stop()
    events = stack.events()
    lost = held_conversation["conversation_id"]
    assert not [e for e in events if e.process_id == lost and e.name == "conversation_resumed"]
    assert not [e for e in events if e.process_id == lost and e.name == "conversation_ended"]
    check_history(stack)
    # The turn the lost conversation was for got exactly one accepted proposal.
    position = {e.event_id: i for i, e in enumerate(events)}
    lost_start = next(
        e for e in events if e.name == "conversation_started" and e.process_id == lost
    )
    turns = [
        e
        for e in events
        if e.name == "round_robin_checkpoint"
        and e.get("index") == held_conversation["index"]
        and position[e.event_id] > position[lost_start.event_id]
    ]
    assert turns, "the held turn was opened after the restart"
    ids = {e.event_id for e in turns}
    accepted = [
        e for e in events if e.name == "proposal_accepted" and e.get("checkpoint_event_id") in ids
    ]
    assert len(accepted) == 1
