"""Constrained proposals: the tool schema sent to the model offers exactly the open values."""

from __future__ import annotations

import json
import random

import pytest
from orchestrator_stack import model_call

from ax3l.orchestrator.mcp_session import ToolDefinition
from ax3l.orchestrator.open_values import constrained_tool, open_values
from ax3l.orchestrator.proposers.search_space import key_of
from ax3l.shared.config_schema import load_schema
from ax3l.shared.registry import BY_NAME, ENTRIES, domain
from ax3l.testing.gbnf import GrammarReader
from ax3l.testing.stack import Stack

SCHEMA = load_schema()


def _tool(entry_name: str) -> ToolDefinition:
    """The tool as the MCP server describes it: plain numbers with a description each."""
    entry = BY_NAME[entry_name]
    names = ("value",) if entry.kind == "single" else ("value_1", "value_2")
    properties = {n: {"type": "number", "description": f"{n} of {entry.name}"} for n in names}
    schema = {"type": "object", "properties": properties, "required": list(names)}
    return ToolDefinition(entry.tool_name, f"assigned {entry.name}", schema)


def _offered(tool: ToolDefinition) -> set[tuple[float, ...]]:
    """Every choice the narrowed schema admits (finite entries)."""
    schema = tool.input_schema
    if "anyOf" in schema:
        return {
            (branch["properties"]["value_1"]["const"], second)
            for branch in schema["anyOf"]
            for second in branch["properties"]["value_2"]["enum"]
        }
    return {(value,) for value in schema["properties"]["value"]["enum"]}


@pytest.mark.parametrize("name", [e.name for e in ENTRIES if domain(SCHEMA, e) is not None])
def test_a_finite_entry_is_offered_exactly_its_untested_choices(name: str) -> None:
    """For every finite entry, after some choices ran, the schema admits exactly the rest."""
    entry = BY_NAME[name]
    legal = domain(SCHEMA, entry) or []
    tested = set(random.Random(name).sample(legal, len(legal) // 3))
    tool = constrained_tool(_tool(name), open_values(SCHEMA, entry, tested))
    offered = _offered(tool)
    assert {key_of(choice) for choice in offered} == set(legal) - tested
    for prop in tool.input_schema["properties"].values():
        assert prop["description"]  # the tool's own descriptions are kept
    assert json.loads(json.dumps(tool.input_schema)) == tool.input_schema


def test_after_a_duplicate_the_duplicate_is_no_longer_offered() -> None:
    """A value that became tested (a duplicate the broker refused) drops out of the enum."""
    entry = BY_NAME["hidden_size"]
    before = open_values(SCHEMA, entry, set())
    tool = constrained_tool(_tool("hidden_size"), before)
    assert 272 in tool.input_schema["properties"]["value"]["enum"]
    after = open_values(SCHEMA, entry, {key_of((272,))})
    narrowed = constrained_tool(_tool("hidden_size"), after)
    assert 272 not in narrowed.input_schema["properties"]["value"]["enum"]
    assert (
        len(narrowed.input_schema["properties"]["value"]["enum"]) == len(before.choices or ()) - 1
    )
    assert "272" not in after.describe().split(":", 1)[1].split(", ")


def test_a_pair_offers_only_first_values_that_still_have_a_partner() -> None:
    """A value_1 whose every value_2 ran has no branch; the others list only untested value_2s."""
    entry = BY_NAME["reward_pair"]
    full_row = {key_of((3, second)) for second in range(-6, 1)}
    tested = full_row | {key_of((0, -6)), key_of((0, 0))}
    tool = constrained_tool(_tool("reward_pair"), open_values(SCHEMA, entry, tested))
    branches = {b["properties"]["value_1"]["const"]: b for b in tool.input_schema["anyOf"]}
    assert 3 not in branches and set(branches) == {0, 1, 2, 4, 5, 6}
    assert branches[0]["properties"]["value_2"]["enum"] == [-5, -4, -3, -2, -1]
    assert all(b["required"] == ["value_1", "value_2"] for b in branches.values())


@pytest.mark.parametrize("name", ["learning_rate", "gamma", "epsilon_pair"])
def test_a_continuous_entry_gets_its_schema_range(name: str) -> None:
    """Continuous settings get minimum and maximum from the schema, no enum."""
    entry = BY_NAME[name]
    values = open_values(SCHEMA, entry, set())
    tool = constrained_tool(_tool(name), values)
    for prop, path in zip(tool.input_schema["properties"].values(), entry.paths, strict=True):
        leaf = SCHEMA.by_path[path]
        assert (prop["minimum"], prop["maximum"]) == (leaf.minimum, leaf.maximum)
        assert "enum" not in prop
    assert "anyOf" not in tool.input_schema
    assert "not yet tested" in values.describe()


def test_an_exhausted_domain_falls_back_to_bounds_and_says_so() -> None:
    """With nothing open (the loop skips such a turn first) the schema is only bounded."""
    entry = BY_NAME["sequence_length"]
    tested = set(domain(SCHEMA, entry) or [])
    values = open_values(SCHEMA, entry, tested)
    tool = constrained_tool(_tool("sequence_length"), values)
    assert "enum" not in tool.input_schema["properties"]["value"]
    assert tool.input_schema["properties"]["value"]["type"] == "integer"
    assert "none" in values.describe()


def test_the_model_is_sent_the_open_values_of_the_current_seed(stack: Stack) -> None:
    """End to end: the first request's enum is every legal hidden size but the golden's, the
    prompt lists them, and AX3L_LLM_CONSTRAINED=off sends the tool unchanged."""
    stack.start()
    model = stack.start_model({"then": model_call(272)})
    proc = stack.orchestrator("llm", url=model.url)
    stack.wait_for(lambda: stack.count("proposal_accepted"), 60, "the first proposal", proc)
    proc.stop()
    first = model.requests()[0]
    (golden,) = [e for e in stack.events("golden_config_created")][:1]
    golden_hidden = golden.get("config")["model"]["hidden_size"]
    enum = first["tools"][0]["function"]["parameters"]["properties"]["value"]["enum"]
    legal = [int(v[0]) for v in domain(SCHEMA, BY_NAME["hidden_size"]) or []]
    assert enum == [v for v in legal if v != golden_hidden]
    assert "Open values for model.hidden_size" in first["messages"][-1]["content"]
    assert str(enum[0]) in first["messages"][-1]["content"]


def test_a_grammar_request_carries_exactly_the_open_values(stack: Stack) -> None:
    """Under AX3L_LLM_GRAMMAR the request carries a grammar instead of the tool, whose every
    reply is one open hidden size (every legal one but the golden's), and a reply that is the
    arguments object is submitted as the tool's call."""
    stack.start()
    model = stack.start_model({"replies": [{"prose": '{"value": 272}'}]})
    proc = stack.orchestrator("llm", url=model.url, env={"AX3L_LLM_GRAMMAR": "true"})
    stack.wait_for(lambda: stack.count("proposal_accepted"), 60, "the first proposal", proc)
    proc.stop()
    first = model.requests()[0]
    assert "tools" not in first and "tool_choice" not in first
    replies = GrammarReader.parse(first["grammar"]).language("answer")
    offered = [json.loads(reply)["value"] for reply in replies]
    (golden,) = [e for e in stack.events("golden_config_created")][:1]
    golden_hidden = golden.get("config")["model"]["hidden_size"]
    legal = [int(v[0]) for v in domain(SCHEMA, BY_NAME["hidden_size"]) or []]
    assert sorted(offered) == [v for v in legal if v != golden_hidden]
    assert all(
        reply == json.dumps({"value": value}) for reply, value in zip(replies, offered, strict=True)
    )
    assert "as one JSON object" in first["messages"][-1]["content"]
    (accepted,) = stack.events("proposal_accepted")[:1]
    assert accepted.get("changes") == {"model.hidden_size": 272}
