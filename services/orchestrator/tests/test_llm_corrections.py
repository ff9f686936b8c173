"""A fallible model: its mistakes are corrected in the conversation, replies are capped, and a
turn it keeps failing goes to the fallback proposer (real stack, scripted model server)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from orchestrator_stack import compared, model_call, run_until

from ax3l.shared.registry import ENTRIES
from ax3l.testing.scripted_llm import random_call_ranges
from ax3l.testing.stack import Stack, check_history

RANGES = random_call_ranges()
OVERFLOW = {
    "status": 400,
    "body": {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
        }
    },
}


def _sent_text(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in request["messages"])


def test_prose_and_a_wrong_tool_are_corrected_in_the_same_conversation(stack: Stack) -> None:
    """Prose and a wrong tool name get NoToolCall and WrongTool prompts; the model then succeeds.
    Each wasted ask says why (``wasted``), and the conversation's end counts them by reason."""
    stack.start()
    script = {
        "replies": [
            {"prose": "I would go with 240.", "reasoning_content": "SECRET-REASONING"},
            model_call(240, name="submit_pair_values"),
            model_call(224),  # the golden's own hidden size: refused
            model_call(240),
        ]
    }
    model = stack.start_model(script)
    run_until(stack, compared(stack), "the first turn", "llm", url=model.url)

    (conversation, *_) = [e.process_id for e in stack.events("conversation_started")]
    ended = [e for e in stack.events("conversation_ended") if e.process_id == conversation]
    assert [e.get("outcome") for e in ended] == ["accepted"]
    refused = stack.events("proposal_rejected_duplicate") + stack.events(
        "proposal_rejected_invalid"
    )
    assert len(refused) == 1
    reason = "duplicate" if refused[0].name == "proposal_rejected_duplicate" else "invalid_value"
    assert ended[0].get("wasted") == {"no_tool_call": 1, "wrong_tool": 1, reason: 1}
    prompts = [e for e in stack.events("prompt_sent") if e.process_id == conversation]
    assert [p.source_name for p in prompts[-3:-1]] == ["NoToolCall", "WrongTool"]
    failures = stack.events("llm_request_failed")
    assert [f.get("kind") for f in failures] == ["no_tool_call", "wrong_tool"]
    assert [f.get("wasted") for f in failures] == ["no_tool_call", "wrong_tool"]
    prompts = prompts[:-1]

    first, second, third = model.requests()[:3]
    assistant, correction = second["messages"][len(first["messages"]) :]
    assert assistant == {"role": "assistant", "content": "I would go with 240."}
    assert correction == {"role": "user", "content": prompts[-2].content}
    assert third["messages"][-1] == {"role": "user", "content": prompts[-1].content}
    assert "submit_pair_values" in prompts[-1].content
    # Reasoning stays in the stored reply; it is never sent back to the model.
    assert all("SECRET-REASONING" not in _sent_text(r) for r in model.requests())
    replies = [e for e in stack.events("reply_received") if e.process_id == conversation]
    stored = replies[0].content["choices"][0]["message"]["reasoning_content"]
    assert stored == "SECRET-REASONING"
    check_history(stack)


def test_every_request_is_capped_and_a_cut_reply_is_a_length_failure(stack: Stack) -> None:
    """max_tokens is sent with every request; a reply cut at it is corrected as ReplyTooLong."""
    stack.start()
    model = stack.start_model({"replies": [{"cut": "Let me think. " * 50}, model_call(240)]})
    proc = stack.orchestrator("llm", url=model.url, env={"AX3L_LLM_MAX_TOKENS": "64"})
    stack.wait_for(compared(stack), 60, "the first turn", proc)
    proc.stop()

    requests = model.requests()
    assert requests and all(r["max_tokens"] == 64 for r in requests)
    # The first turn's events (the next turn may have begun before the stop).
    first = ENTRIES[0].name
    (failure,) = [e for e in stack.events("llm_request_failed") if e.parameter == first]
    assert failure.get("kind") == "length" and "64 completion tokens" in failure.get("detail")
    prompts = [e for e in stack.events("prompt_sent") if e.parameter == first]
    assert prompts[-1].source_name == "ReplyTooLong"
    # The cut text is not fed back: the correction follows the opening prompts directly.
    assert len(requests[1]["messages"]) == len(requests[0]["messages"]) + 1
    assert stack.events("conversation_ended")[0].get("outcome") == "accepted"


def test_a_turn_the_model_keeps_failing_goes_to_the_fallback_and_the_streak_resets(
    stack: Stack,
) -> None:
    """After N failed model conversations tpe takes the turn; the next turn is the model's."""
    stack.start()
    script = {
        "replies": [{"status": 500, "body": "down"}, {"status": 503, "body": "loading"}],
        "then": {"random_call": RANGES},
    }
    model = stack.start_model(script)
    proc = stack.orchestrator("llm", url=model.url, env={"AX3L_LLM_FALLBACK_AFTER": "2"})
    stack.wait_for(compared(stack, 2), 90, "two turns", proc)
    status = stack.status()
    proc.stop()

    started = stack.events("conversation_started")
    assert [(e.parameter, e.get("proposer")) for e in started[:4]] == [
        ("hidden_size", "llm"),
        ("hidden_size", "llm"),
        ("hidden_size", "tpe"),
        ("sequence_length", "llm"),
    ]
    assert started[2].get("fallback_for") == "llm" and started[2].get("failure_streak") == 2
    assert started[3].get("fallback_for") is None
    ended = stack.events("conversation_ended")
    assert [e.get("outcome") for e in ended[:4]] == ["failed", "failed", "accepted", "accepted"]
    accepted = stack.events("proposal_accepted")
    assert [a.parameter for a in accepted[:2]] == ["hidden_size", "sequence_length"]
    assert status["fallback_proposer"] == "tpe" and status["llm_fallback_after"] == 2
    assert status["failure_streak"] == 0
    check_history(stack)


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_the_failure_streak_survives_a_restart(stack: Stack) -> None:
    """The streak is read from the events: a restarted orchestrator falls back at once."""
    stack.start()
    # A second between failures: the first process is killed after exactly one (the MCP child
    # starts in milliseconds, so instant failures could reach the streak before the kill).
    model = stack.start_model({"then": {"status": 500, "body": "down", "delay": 1.0}})
    env = {"AX3L_LLM_FALLBACK_AFTER": "2"}
    proc = stack.orchestrator("llm", url=model.url, env=env)
    stack.wait_for(
        lambda: len(stack.events("conversation_ended")) >= 1, 60, "a failed conversation", proc
    )
    proc.kill()
    # Counted by arrival: a request the killed process had just sent may still be arriving.
    restarted_at = time.time()

    run_until(stack, compared(stack), "the first turn", "llm", url=model.url, env=env)
    started = stack.events("conversation_started")
    fallbacks = [e for e in started if e.get("fallback_for") == "llm"]
    assert fallbacks and fallbacks[0].parameter == "hidden_size"
    ended = stack.events("conversation_ended")
    failed = [e for e in ended if e.get("outcome") == "failed" and e.parameter == "hidden_size"]
    # Exactly the streak's worth of failures before the fallback, across both processes; the
    # restart asked the model about hidden_size once (the next turn may have begun).
    asked = [
        request
        for request in model.requests(since=restarted_at)
        if "for hidden_size, the parameter assigned" in json.dumps(request["tools"])
    ]
    assert len(failed) == 2 and len(asked) == 1
    check_history(stack)


def test_fallback_none_keeps_asking_the_model(stack: Stack) -> None:
    """AX3L_LLM_FALLBACK=none never hands a turn to another proposer."""
    stack.start()
    script = {"replies": [{"status": 500, "body": "x"}] * 3, "then": model_call(240)}
    model = stack.start_model(script)
    env = {"AX3L_LLM_FALLBACK": "none", "AX3L_LLM_FALLBACK_AFTER": "1"}
    proc = stack.orchestrator("llm", url=model.url, env=env)
    stack.wait_for(compared(stack), 60, "the first turn", proc)
    status = stack.status()
    proc.stop()
    assert {e.get("proposer") for e in stack.events("conversation_started")} == {"llm"}
    assert stack.events("proposal_accepted")[0].get("values") == {"value": 240}
    assert status["fallback_proposer"] is None


def test_a_context_overflow_rebuilds_the_prompts_and_asks_once_more(stack: Stack) -> None:
    """HTTP 400 exceed_context_size is logged as context_overflow and retried once, smaller."""
    stack.start()
    model = stack.start_model({"replies": [OVERFLOW, model_call(240)]})
    run_until(stack, compared(stack), "the first turn", "llm", url=model.url)

    (failure,) = stack.events("llm_request_failed")
    assert failure.get("kind") == "context_overflow" and failure.get("http_status") == 400
    ended = stack.events("conversation_ended")
    assert len(ended) >= 1 and ended[0].get("outcome") == "accepted"
    first, second = model.requests()[:2]
    assert len(second["messages"]) == len(first["messages"])
    assert len(json.dumps(second["messages"])) <= len(json.dumps(first["messages"]))


def test_a_second_overflow_ends_the_conversation(stack: Stack) -> None:
    """A context overflow after the shrink fails the conversation (retried with backoff)."""
    stack.start()
    model = stack.start_model({"replies": [OVERFLOW, OVERFLOW, model_call(240)]})
    run_until(stack, compared(stack), "the first turn", "llm", url=model.url)
    kinds = [f.get("kind") for f in stack.events("llm_request_failed")]
    assert kinds == ["context_overflow", "context_overflow"]
    outcomes = [e.get("outcome") for e in stack.events("conversation_ended")[:2]]
    assert outcomes == ["failed", "accepted"]


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_a_conversation_never_outlives_its_deadline(stack: Stack) -> None:
    """The conversation deadline bounds the last request: it times out, it is not waited out."""
    stack.start()
    script = {
        "replies": [{"prose": "hmm", "delay": 1.0}, model_call(240, delay=30)],
        "then": model_call(256),
    }
    model = stack.start_model(script)
    env = {"AX3L_CONVERSATION_TIMEOUT": "2.5", "AX3L_LLM_TIMEOUT": "60"}
    began = time.monotonic()
    proc = stack.orchestrator("llm", url=model.url, env=env)
    stack.wait_for(lambda: len(model.requests()) >= 3, 60, "the next conversation", proc)
    elapsed = time.monotonic() - began
    stack.wait_for(compared(stack), 60, "the first turn", proc)
    proc.stop()
    kinds = [f.get("kind") for f in stack.events("llm_request_failed")]
    assert kinds[:2] == ["no_tool_call", "timeout"]
    # The next conversation began long before the 30 s reply would have ended.
    assert elapsed < 20
    assert stack.events("proposal_accepted")[0].get("values") == {"value": 256}
