"""LLM conversations end to end: two full cycles, every prompt stored exactly as sent."""

from __future__ import annotations

import json
import re
from typing import Any

from ax3l.shared.config_schema import load_schema
from ax3l.shared.registry import ENTRIES
from ax3l.testing.stack import Stack, check_history

SCHEMA = load_schema()
# Two values per entry, all different from the defaults and from each other, so no proposal is
# ever a duplicate whatever gets promoted. gamma 0.91 beats the defaults on the surrogate.
PROPOSALS: dict[str, list[Any]] = {
    "hidden_size": [240, 256],
    "sequence_length": [12, 16],
    "batch_size": [26, 28],
    "learning_rate": [0.0022, 0.0023],
    "gamma": [0.91, 0.92],
    "epsilon_pair": [[0.95, 0.96], [0.94, 0.95]],
    "reward_pair": [[3, -3], [1, -1]],
}


def tool_call(entry_name: str, cycle: int) -> dict[str, Any]:
    value = PROPOSALS[entry_name][cycle]
    if isinstance(value, list):
        return {
            "tool_call": {
                "name": "submit_pair_values",
                "arguments": {"value_1": value[0], "value_2": value[1]},
            }
        }
    return {"tool_call": {"name": "submit_single_value", "arguments": {"value": value}}}


def sent_prompts(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (m["role"], m["content"]) for m in request["messages"] if m["role"] in ("system", "user")
    ]


def expected_sources(entry_name: str, first: bool) -> list[str]:
    head = ["ProjectContext"] + (["FirstContact"] if first else [])
    if entry_name == "epsilon_pair":
        return [*head, "ComparisonEpsilonPair", "FirstContactEpsilonPair"]
    if entry_name == "reward_pair":
        return [*head, "ComparisonRewardPair", "FirstContactRewardPair"]
    return [*head, "Comparison", "FirstContactSingle" if first else "ComparisonSingle"]


def test_two_full_cycles_store_every_prompt_exactly_as_sent(stack: Stack) -> None:
    """Fourteen conversations in round-robin order; prompts, replies and tools match the wire."""
    stack.start()
    replies = [tool_call(entry.name, cycle) for cycle in (0, 1) for entry in ENTRIES]
    model = stack.start_model({"replies": replies})
    capture_dir = stack.folder / "capture"
    proc = stack.orchestrator("llm", url=model.url, args=["--output", str(capture_dir)])
    stack.wait_for(lambda: stack.count("configuration_compared") >= 14, 150, "two cycles", proc)
    proc.stop()

    summary = check_history(stack)
    assert summary.steps[:14] == [i % 7 for i in range(14)]
    # The loop went on to a fifteenth turn (the script has run out by then): look at 14.
    requests = model.requests()[:14]
    assert len(requests) == 14
    events = stack.events()
    conversations = [e for e in events if e.name == "conversation_started"][:14]
    assert [c.parameter for c in conversations] == [e.name for e in ENTRIES] * 2

    for number, (conversation, request) in enumerate(zip(conversations, requests, strict=True)):
        entry = ENTRIES[number % 7]
        mine = [e for e in events if e.process_id == conversation.process_id]
        prompts = [e for e in mine if e.name == "prompt_sent"]
        assert [p.source_name for p in prompts] == expected_sources(entry.name, number == 0)
        assert [p.content for p in prompts] == [text for _, text in sent_prompts(request)]
        assert all(p.parameter == entry.name for p in prompts)
        assert sent_prompts(request)[0][0] == "system"

        (tool,) = request["tools"]
        assert tool["type"] == "function" and tool["function"]["name"] == entry.tool_name
        assert list(tool["function"]["parameters"]["properties"]) == list(entry.value_names)
        assert entry.name in tool["function"]["description"]
        assert request["tool_choice"] == "required"
        assert request["parallel_tool_calls"] is False and request["stream"] is False

        (reply,) = [e for e in mine if e.name == "reply_received"]
        assert reply.parent == prompts[-1].event_id
        assert {"choices", "usage", "timings"} <= set(reply.content)
        call = reply.content["choices"][0]["message"]["tool_calls"][0]["function"]
        assert json.loads(call["arguments"]) == replies[number]["tool_call"]["arguments"]
        ended = [e for e in mine if e.name == "conversation_ended"]
        assert ended[0].get("outcome") == "accepted" and ended[0].get("proposer") == "llm"

    check_comparable_histories(stack, events)
    assert not capture_dir.exists(), "raw capture is off by default: no directory may appear"
    check_process_ids(proc, events, conversations)


def check_process_ids(proc: Any, events: list[Any], conversations: list[Any]) -> None:
    """S139 as implemented (the orchestrator README's event list): the loop's process id is
    printed at its start and is the process id of its checkpoints and the ``loop_process_id``
    of each conversation; a conversation's events share the conversation's own id; a run's
    events carry its run id."""
    printed = re.search(r"process id ([0-9a-f-]{36})", proc.log_path.read_text())
    assert printed is not None
    loop_id = printed.group(1)
    checkpoints = [e for e in events if e.name == "round_robin_checkpoint"]
    assert checkpoints and all(e.process_id == loop_id for e in checkpoints)
    ids = {c.process_id for c in conversations}
    assert len(ids) == len(conversations) and loop_id not in ids
    for conversation in conversations:
        assert conversation.get("loop_process_id") == loop_id
        mine = {e.name for e in events if e.process_id == conversation.process_id}
        assert {"prompt_sent", "reply_received", "conversation_ended"} <= mine
    for submitted in (e for e in events if e.name == "simulation_submitted"):
        assert submitted.process_id == submitted.get("run_id")


def check_comparable_histories(stack: Stack, events: list[Any]) -> None:
    """Each report lists exactly the runs whose other settings equaled the golden at the time."""
    runs = stack.runs()
    for prompt in (e for e in events if e.name == "prompt_sent"):
        if prompt.source_name not in (
            "Comparison",
            "ComparisonEpsilonPair",
            "ComparisonRewardPair",
        ):
            continue
        entry = next(e for e in ENTRIES if e.name == prompt.parameter)
        golden = [
            g for g in events if g.name == "golden_config_created" and g.event_id < prompt.event_id
        ][-1]
        golden_flat = SCHEMA.flatten(golden.get("config"))
        known = {
            e.process_id
            for e in events
            if e.name == "simulation_submitted" and e.event_id < prompt.event_id
        }
        others = [c for c in SCHEMA.columns if c not in entry.columns and c != "seed"]
        expected = [
            r for r in runs if r["run_id"] in known and all(r[c] == golden_flat[c] for c in others)
        ]
        assert expected, "the golden run itself is always comparable"
        if prompt.source_name == "Comparison":
            block = re.search(r"```json\n(.*)\n```", prompt.content, re.S)
            assert block is not None, prompt.content
            report = json.loads(block.group(1))
            listed = {r["run_id"] for group in report for r in group["current_seed"]}
            assert listed == {r["run_id"] for r in expected}
            assert f"high score {golden.get('high_score')}" in prompt.content
        else:
            rows = [line for line in prompt.content.splitlines() if re.match(r"\| -?\d", line)]
            values = {tuple(r[c] for c in entry.columns) for r in expected}
            assert len(rows) == len(values)
