"""The experiment against a real llama-server serving a tiny real model (Gemma 3 270M behind
the user's Qwen3.5-4B template): the model is mostly wrong, and the experiment keeps moving.

Run by ``make test-llm`` (builds or reuses the cached llama-server and model, starts it)."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from ax3l.testing.stack import Stack, check_history

MAX_TOKENS = 256
CONVERSATION_TIMEOUT = 120.0
# Generous: on two cores the tiny model writes ~50 tokens/s, and it may fail every turn.
CYCLE_DEADLINE = float(os.environ.get("AX3L_TEST_LLM_DEADLINE", "1500"))
KINDS = {
    "timeout",
    "connection_error",
    "http_error",
    "context_overflow",
    "invalid_reply",
    "no_tool_call",
    "wrong_tool",
    "wrong_arguments",
    "length",
}


def _steps(stack: Stack) -> int:
    return stack.count("configuration_compared", "parameter_space_exhausted")


@pytest.mark.timeout(CYCLE_DEADLINE + 120)
def test_a_full_cycle_completes_with_a_real_model_however_badly_it_behaves(
    stack: Stack, llm_url: str
) -> None:
    """Seven steps complete (the fallback taking what the model fails), every failure is logged
    with its kind, no reply exceeds its cap and no conversation outlives its deadline."""
    stack.start(surrogate_seconds=1.0)
    env = {
        "AX3L_LLM_MAX_TOKENS": str(MAX_TOKENS),
        "AX3L_LLM_TIMEOUT": "60",
        "AX3L_CONVERSATION_TIMEOUT": str(CONVERSATION_TIMEOUT),
        "AX3L_LLM_FALLBACK_AFTER": "2",
        "AX3L_LLM_FALLBACK": "tpe",
    }
    began = time.monotonic()
    proc = stack.orchestrator("llm", url=llm_url, env=env)
    # Seeding is one step short of the cycle: wait for seven round-robin steps after it.
    stack.wait_for(lambda: _steps(stack) >= 7, CYCLE_DEADLINE, "one full cycle", proc)
    elapsed = time.monotonic() - began
    status = stack.status()
    proc.stop()

    summary = check_history(stack)  # no run submitted twice, steps in order, goldens consistent
    assert summary.steps[:7] == list(range(7))
    assert status["cycles"] >= 1 or _steps(stack) >= 7

    failures = stack.events("llm_request_failed")
    assert all(f.get("kind") in KINDS and f.level == "ERROR" for f in failures)
    replies = stack.events("reply_received")
    assert replies, "the real model never answered"
    completion_tokens = [r.content["usage"]["completion_tokens"] for r in replies]
    assert max(completion_tokens) <= MAX_TOKENS

    with stack._cursor() as cur:
        cur.execute(
            "SELECT s.process_id, TIMESTAMPDIFF(MICROSECOND, s.occurred_at, e.occurred_at) / 1e6"
            " FROM events s JOIN events e ON e.process_id = s.process_id"
            " AND e.name = 'conversation_ended' WHERE s.name = 'conversation_started'"
        )
        durations = [float(row[1]) for row in cur.fetchall()]
    assert durations and max(durations) <= CONVERSATION_TIMEOUT + 5

    proposers = Counter(
        (e.get("proposer"), bool(e.get("fallback_for")))
        for e in stack.events("conversation_started")
    )
    accepted = stack.count("proposal_accepted")
    print(
        f"\nreal model: {_steps(stack)} steps in {elapsed:.0f} s, {len(replies)} replies,"
        f" {len(failures)} failures {dict(Counter(f.get('kind') for f in failures))},"
        f" conversations {dict(proposers)}, {accepted} accepted,"
        f" completion tokens max {max(completion_tokens)},"
        f" longest conversation {max(durations):.1f} s"
    )


GRAMMAR_TURNS = 8  # one cycle of the seven entries and one more: finite, continuous and pairs


@pytest.mark.timeout(CYCLE_DEADLINE + 120)
def test_under_the_grammar_every_reply_is_a_legal_open_call(stack: Stack, llm_url: str) -> None:
    """With AX3L_LLM_GRAMMAR the tiny model wastes no ask: every reply is a legal call of the
    tool with open values (no prose, no malformed arguments, no invalid value, no duplicate,
    no token cap), so the model proposes every turn itself."""
    stack.start(surrogate_seconds=1.0)
    env = {
        "AX3L_LLM_MAX_TOKENS": str(MAX_TOKENS),
        "AX3L_LLM_TIMEOUT": "60",
        "AX3L_CONVERSATION_TIMEOUT": str(CONVERSATION_TIMEOUT),
        "AX3L_LLM_GRAMMAR": "true",
    }
    began = time.monotonic()
    proc = stack.orchestrator("llm", url=llm_url, env=env)
    stack.wait_for(
        lambda: stack.count("proposal_accepted") >= GRAMMAR_TURNS,
        CYCLE_DEADLINE,
        f"{GRAMMAR_TURNS} accepted proposals",
        proc,
    )
    elapsed = time.monotonic() - began
    proc.stop()

    check_history(stack)
    failures = stack.events("llm_request_failed")
    refused = stack.events("proposal_rejected_invalid") + stack.events(
        "proposal_rejected_duplicate"
    )
    assert not failures, [(f.get("kind"), f.get("detail")) for f in failures]
    assert not refused, [(r.name, r.get("reason")) for r in refused]
    started = stack.events("conversation_started")
    assert not [e for e in started if e.get("fallback_for")]
    replies = stack.events("reply_received")
    accepted = stack.count("proposal_accepted")
    assert len(replies) == accepted  # one ask per accepted proposal
    parameters = {e.parameter for e in stack.events("proposal_accepted")}
    assert {"learning_rate", "epsilon_pair", "reward_pair", "hidden_size"} <= parameters
    seconds = sorted(
        ((r.content.get("timings") or {}).get("prompt_ms", 0.0) / 1000)
        + ((r.content.get("timings") or {}).get("predicted_ms", 0.0) / 1000)
        for r in replies
    )
    print(
        f"\nreal model under the grammar: {accepted} accepted from {len(replies)} asks in"
        f" {elapsed:.0f} s; seconds per ask median {seconds[len(seconds) // 2]:.1f},"
        f" max {seconds[-1]:.1f}"
    )
