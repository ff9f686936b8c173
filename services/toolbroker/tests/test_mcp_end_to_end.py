"""A real MCP stdio subprocess -> the broker -> the reference SnakeLab, as the orchestrator
drives it: bound, mismatched and unbound sessions, and a broker that is down."""

import json

from broker_harness import SCHEMA, mcp_session, open_turn, text_of

from ax3l.testing.plugin import free_port


def payload_of(result):
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


async def test_single_session_submits_rejects_and_refuses(databases, lab, golden, broker):
    """A hidden_size session relays the broker's decisions and refuses non-numbers and pairs."""
    async with mcp_session("hidden_size", broker.endpoint) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"submit_single_value", "submit_pair_values"}
        description = tools["submit_single_value"].description
        leaf = SCHEMA.by_path["model.hidden_size"]
        assert "hidden_size" in description and leaf.description in description
        assert leaf.rules_text() in description
        assert tools["submit_single_value"].input_schema["properties"]["value"]["type"] == (
            "number"
        )

        await open_turn(databases, "hidden_size")
        accepted = payload_of(await client.call_tool("submit_single_value", {"value": 80}))
        assert accepted["status"] == "ok"
        stored = lab.stored_config(accepted["run_id"])
        assert stored == SCHEMA.with_values(golden["config"], {"model.hidden_size": 80})

        # The next turn: rejections keep it open, as the orchestrator's corrections do.
        await open_turn(databases, "hidden_size")

        duplicate = payload_of(await client.call_tool("submit_single_value", {"value": 80}))
        assert duplicate["code"] == "duplicate_config" and duplicate["source_name"] == "NoDupes"
        invalid = payload_of(await client.call_tool("submit_single_value", {"value": 65}))
        assert invalid["code"] == "invalid_value" and invalid["source_name"] == "InvalidValue"
        unchanged = payload_of(await client.call_tool("submit_single_value", {"value": 224}))
        assert unchanged["code"] == "duplicate_config" and "changes nothing" in unchanged["reason"]

        for status, value in (("cancelled", 96), ("failed", 128), ("running", 144)):
            lab.insert_run(
                SCHEMA.with_values(golden["config"], {"model.hidden_size": value}),
                status=status,
                version="1.0.0",
            )
            stored = payload_of(await client.call_tool("submit_single_value", {"value": value}))
            assert stored["code"] == "duplicate_config" and status in stored["reason"]
        other_seed = {"model.hidden_size": 112, "seed": golden["config"]["seed"] + 10**6}
        lab.insert_run(SCHEMA.with_values(golden["config"], other_seed))
        new_here = payload_of(await client.call_tool("submit_single_value", {"value": 112}))
        assert new_here["status"] == "ok"

        handled = broker.broker.status.requests_handled
        for bad in ("96", True, None):
            refused = await client.call_tool("submit_single_value", {"value": bad})
            assert refused.is_error
        mismatched = await client.call_tool("submit_pair_values", {"value_1": 2, "value_2": -1})
        assert mismatched.is_error and "single parameter hidden_size" in text_of(mismatched)
        assert broker.broker.status.requests_handled == handled


async def test_pair_session_submits_and_refuses_single(databases, lab, golden, broker):
    """A reward_pair session shows the mapping table, submits pairs and refuses singles."""
    async with mcp_session("reward_pair", broker.endpoint) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        description = tools["submit_pair_values"].description
        assert "| reward_pair | game.rewards.closer_to_food | game.rewards.further_from_food |" in (
            description
        )
        assert SCHEMA.by_path["game.rewards.closer_to_food"].rules_text() in description

        await open_turn(databases, "reward_pair")
        accepted = payload_of(
            await client.call_tool("submit_pair_values", {"value_1": 3, "value_2": -1})
        )
        assert lab.stored_config(accepted["run_id"]) == SCHEMA.with_values(
            golden["config"],
            {"game.rewards.closer_to_food": 3, "game.rewards.further_from_food": -1},
        )
        await open_turn(databases, "reward_pair")
        invalid = payload_of(
            await client.call_tool("submit_pair_values", {"value_1": 2.5, "value_2": -1})
        )
        assert invalid["code"] == "invalid_value"
        refused = await client.call_tool("submit_single_value", {"value": 3})
        assert refused.is_error and "submit_pair_values" in text_of(refused)


async def test_unbound_session_lists_tools_but_submits_nothing(databases, lab, golden, broker):
    """Without AX3L_CONVERSATION_PARAMETER discovery works and every submission is refused."""
    async with mcp_session(None, broker.endpoint) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        single = await client.call_tool("submit_single_value", {"value": 0.95})
        pair = await client.call_tool("submit_pair_values", {"value_1": 0.9, "value_2": 0.95})
    assert names == {"submit_single_value", "submit_pair_values"}
    assert single.is_error and "AX3L_CONVERSATION_PARAMETER" in text_of(single)
    assert pair.is_error and "AX3L_CONVERSATION_PARAMETER" in text_of(pair)
    assert broker.broker.status.requests_handled == 0


async def test_broker_down_is_a_tool_error_after_the_timeout(databases):
    """With nothing listening the call fails as a tool error at the timeout, not retried."""
    async with mcp_session("gamma", f"tcp://127.0.0.1:{free_port()}", wait="0.5") as client:
        result = await client.call_tool("submit_single_value", {"value": 0.95})
    assert result.is_error
    assert "did not answer within 0.5 s" in text_of(result) and "not retried" in text_of(result)
