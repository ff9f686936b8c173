"""Corrections and model failures: rejections are fed back, failures are survived and retried."""

from __future__ import annotations

import json

from orchestrator_stack import model_call

from ax3l.testing.stack import Stack, check_history


def test_rejections_are_answered_with_correction_prompts_in_the_same_conversation(
    stack: Stack,
) -> None:
    """An invalid and a duplicate proposal get InvalidValue and NoDupes fed back, then succeed."""
    stack.start()
    model = stack.start_model({"replies": [model_call(1000), model_call(224), model_call(240)]})
    proc = stack.orchestrator("llm", url=model.url)
    stack.wait_for(lambda: stack.count("configuration_compared"), 60, "the first turn", proc)
    proc.stop()

    requests = model.requests()
    first, second, third = requests[:3]
    (conversation,) = [e.process_id for e in stack.events("conversation_started")][:1]
    prompts = [e for e in stack.events("prompt_sent") if e.process_id == conversation]
    corrections = prompts[-2:]
    assert [p.source_name for p in corrections] == ["InvalidValue", "NoDupes"]
    assert all(p.parameter == "hidden_size" for p in corrections)

    # Each retry repeats the conversation and appends assistant call, tool result, correction.
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assistant, tool, user = second["messages"][len(first["messages"]) :]
    assert assistant["role"] == "assistant"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"value": 1000}
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    result = json.loads(tool["content"])
    assert result["status"] == "rejected" and result["code"] == "invalid_value"
    assert user == {"role": "user", "content": corrections[0].content}
    assert result["prompt"] == corrections[0].content
    assert third["messages"][-1] == {"role": "user", "content": corrections[1].content}
    assert json.loads(third["messages"][-2]["content"])["code"] == "duplicate_config"

    replies = [e for e in stack.events("reply_received") if e.process_id == conversation]
    assert [r.parent for r in replies] == [prompts[-3].event_id, *[p.event_id for p in corrections]]
    assert stack.events("proposal_rejected_invalid") and stack.events("proposal_rejected_duplicate")
    (accepted,) = stack.events("proposal_accepted")[:1]
    assert accepted.get("values") == {"value": 240}
    assert len(stack.events("round_robin_checkpoint")) >= 1
    check_history(stack)


def test_too_many_corrections_end_the_conversation_and_retry_the_same_entry(stack: Stack) -> None:
    """Beyond AX3L_MAX_CORRECTIONS the conversation ends with an error; the entry is retried."""
    stack.start()
    model = stack.start_model({"replies": [model_call(1000), model_call(2000), model_call(240)]})
    proc = stack.orchestrator("llm", url=model.url, env={"AX3L_MAX_CORRECTIONS": "1"})
    stack.wait_for(lambda: stack.count("configuration_compared"), 60, "the first turn", proc)
    proc.stop()

    started = stack.events("conversation_started")
    ended = stack.events("conversation_ended")
    assert [e.parameter for e in started[:2]] == ["hidden_size", "hidden_size"]
    assert ended[0].level == "ERROR" and ended[0].get("outcome") == "failed"
    assert "2 replies needed a correction, more than the 1" in ended[0].get("error")
    assert ended[1].get("outcome") == "accepted"
    checkpoints = stack.events("round_robin_checkpoint")
    assert [c.get("index") for c in checkpoints[:2]] == [0, 0]
    assert len(model.requests()[1]["messages"]) > len(model.requests()[0]["messages"])
    assert len(model.requests()[2]["messages"]) == len(model.requests()[0]["messages"])
    summary = check_history(stack)
    assert summary.steps[0] == 0


def test_every_model_failure_is_logged_survived_and_retried(stack: Stack) -> None:
    """HTTP 500, prose, a wrong tool, wrong or string arguments and a timeout never stop it."""
    # The fallback is off here: this test pins the model's own failure handling.
    stack.start()
    script = {
        "replies": [
            {"status": 500, "body": "model crashed"},
            {"prose": "I would go with 240."},
            model_call(240, name="submit_pair_values"),
            {"tool_call": {"name": "submit_single_value", "arguments": {"size": 240}}},
            model_call("240"),
            model_call(240, delay=3),
            model_call(240),
        ]
    }
    model = stack.start_model(script)
    capture_dir = stack.folder / "capture"
    proc = stack.orchestrator(
        "llm",
        url=model.url,
        env={"AX3L_LLM_TIMEOUT": "1", "AX3L_RAW_LOGS_ENABLED": "true", "AX3L_LLM_FALLBACK": "none"},
        args=["--output", str(capture_dir)],
    )
    stack.wait_for(lambda: stack.count("configuration_compared"), 90, "the first turn", proc)
    status = stack.status()
    proc.stop()

    failures = stack.events("llm_request_failed")
    assert [f.get("kind") for f in failures] == [
        "http_error",
        "no_tool_call",
        "wrong_tool",
        "wrong_arguments",
        "wrong_arguments",
        "timeout",
    ]
    assert all(f.level == "ERROR" and f.parameter == "hidden_size" for f in failures)
    assert failures[0].get("http_status") == 500
    ended = stack.events("conversation_ended")
    # The HTTP error and the timeout end their conversations; the model's four mistakes are
    # corrected in one conversation until the fourth exceeds the three corrections allowed.
    assert [e.get("outcome") for e in ended[:4]] == ["failed"] * 3 + ["accepted"]
    assert {c.get("index") for c in stack.events("round_robin_checkpoint")[:4]} == {0}
    assert [f.get("correctable") for f in failures] == [False, True, True, True, True, False]
    assert failures[1].process_id == failures[4].process_id
    replies = {r.process_id for r in stack.events("reply_received")}
    assert failures[1].process_id in replies  # prose is a reply: stored, then refused
    assert failures[0].process_id not in replies  # an HTTP error has no reply to store
    assert "timeout" in (status["last_error"] or "")
    check_history(stack)

    files = list((capture_dir / "conversations").glob("*.jsonl"))
    assert len(files) >= 4 and (capture_dir / "run.log").exists()
    kinds = {json.loads(line)["kind"] for f in files for line in f.read_text().splitlines()}
    assert {"request", "reply", "tool_result"} <= kinds
