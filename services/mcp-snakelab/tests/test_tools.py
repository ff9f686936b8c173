"""The tools in-process (SDK in-memory client) against a scripted broker on a real socket."""

import asyncio
import contextlib
import json

import pytest
from mcp import Client

from ax3l.app.snakelab.tools.binding import Binding, binding_from_env
from ax3l.app.snakelab.tools.server import build_server
from ax3l.shared.config_schema import load_schema
from ax3l.shared.tool_channel import ZMQClient
from ax3l.testing.zmq_peer import ScriptedPeer, broker_reply

SCHEMA = load_schema()


def scripted_broker(payload):
    """A broker that records each request and answers with ``payload`` (or never, if None)."""
    return ScriptedPeer(lambda request: None if payload is None else broker_reply(request, payload))


@contextlib.asynccontextmanager
async def session(parameter, payload, wait=5.0):
    broker = scripted_broker(payload)
    binding = binding_from_env({"AX3L_CONVERSATION_PARAMETER": parameter})
    server = build_server(binding, SCHEMA, ZMQClient(broker.endpoint, timeout=wait))
    try:
        async with Client(server) as client:
            yield client, broker
    finally:
        broker.close()


def text(result):
    (content,) = result.content
    return content.text


async def test_single_value_is_forwarded_in_the_contract_envelope():
    """The tool sends the spec's envelope and returns the reply payload unchanged as JSON."""
    reply = {
        "status": "rejected",
        "code": "invalid_value",
        "reason": "r",
        "prompt": "p",
        "source_name": "InvalidValue",
        "extra": [1, 2.50],
    }
    async with session("learning_rate", reply) as (client, broker):
        result = await client.call_tool("submit_single_value", {"value": 0.003})
    assert broker.requests == [
        {
            "protocol_version": 1,
            "sender": "mcp-snakelab",
            "target": "snakelab",
            "method": "submit_single_value",
            "payload": {"parameter": "learning_rate", "value": 0.003},
        }
    ]
    assert not result.is_error and json.loads(text(result)) == reply


async def test_pair_values_are_forwarded_with_the_bound_pair():
    """The pair identity comes from the binding; integers stay integers."""
    async with session("reward_pair", {"status": "ok", "run_id": "r"}) as (client, broker):
        result = await client.call_tool("submit_pair_values", {"value_1": 3, "value_2": -1})
    (request,) = broker.requests
    assert request["method"] == "submit_pair_values"
    assert request["payload"] == {"pair": "reward_pair", "value_1": 3, "value_2": -1}
    assert isinstance(request["payload"]["value_1"], int)
    assert json.loads(text(result)) == {"status": "ok", "run_id": "r"}


@pytest.mark.parametrize("value", ["0.97", True, None, [0.97], float("nan"), float("inf")])
async def test_non_numbers_and_non_finite_values_are_refused_before_forwarding(value):
    """Strings, booleans, null, lists, NaN and infinities never leave the tool."""
    async with session("gamma", {"status": "ok", "run_id": "r"}) as (client, broker):
        result = await client.call_tool("submit_single_value", {"value": value})
    assert result.is_error and broker.requests == []


@pytest.mark.parametrize("bad", ["3", True, False, None, [3], float("nan")])
@pytest.mark.parametrize("position", ["value_1", "value_2"])
async def test_a_pair_with_a_string_or_boolean_is_refused_before_forwarding(bad, position):
    """S83: a pair whose first or second value is a string, a boolean, null, a list or NaN
    (the other value a valid number, so only the type is wrong) never leaves the tool, and the
    tool error names the argument; the same call with numbers is forwarded."""
    values = {"value_1": 3, "value_2": -1, position: bad}
    async with session("reward_pair", {"status": "ok", "run_id": "r"}) as (client, broker):
        result = await client.call_tool("submit_pair_values", values)
        assert result.is_error and broker.requests == []
        assert position in text(result)
        fine = await client.call_tool("submit_pair_values", {"value_1": 3, "value_2": -1})
    assert not fine.is_error and len(broker.requests) == 1


async def test_broker_protocol_errors_are_flagged_but_passed_through():
    """A broker error payload is returned as its JSON text with isError set."""
    error = {"error": {"code": "handler_error", "message": "no golden configuration yet"}}
    async with session("gamma", error) as (client, _):
        result = await client.call_tool("submit_single_value", {"value": 0.95})
    assert result.is_error and json.loads(text(result)) == error


async def test_a_silent_broker_is_a_tool_error_after_one_attempt():
    """A timeout becomes a tool error; the request was sent once and never again."""
    async with session("gamma", None, wait=0.3) as (client, broker):
        result = await client.call_tool("submit_single_value", {"value": 0.95})
        await asyncio.sleep(0.1)
    assert result.is_error and "did not answer" in text(result)
    assert len(broker.requests) == 1


async def test_descriptions_name_the_assignment_and_its_rules():
    """Bound descriptions carry the parameter's schema text and rules; pairs the mapping."""
    async with session("epsilon_pair", None) as (client, _):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    pair = tools["submit_pair_values"]
    for path in ("epsilon.initial", "epsilon.decay"):
        leaf = SCHEMA.by_path[path]
        assert leaf.description in pair.description and leaf.rules_text() in pair.description
    assert "| epsilon_pair | epsilon.initial | epsilon.decay |" in pair.description
    assert "| reward_pair |" in pair.description
    properties = pair.input_schema["properties"]
    assert "epsilon.initial" in properties["value_1"]["description"]
    assert pair.input_schema["required"] == ["value_1", "value_2"]
    assert "assigned the parameter pair epsilon_pair" in tools["submit_single_value"].description


async def test_unbound_descriptions_say_submissions_are_refused():
    """An unbound session still describes both tools, and says why it cannot submit."""
    server = build_server(Binding(None, ""), SCHEMA, ZMQClient("tcp://127.0.0.1:1", timeout=1))
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    assert all("no assigned parameter" in tool.description for tool in tools)
