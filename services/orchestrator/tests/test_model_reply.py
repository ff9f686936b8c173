"""Reading the model's reply: exactly one call of the bound tool with exactly its numbers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ax3l.orchestrator.llm_client import (
    ModelClient,
    ModelFailure,
    extract_grammar_call,
    extract_tool_call,
)
from ax3l.orchestrator.mcp_session import ToolDefinition

SINGLE = ToolDefinition(
    "submit_single_value",
    "Submit one value.",
    {"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]},
)
PAIR = ToolDefinition(
    "submit_pair_values",
    "Submit two values.",
    {
        "type": "object",
        "properties": {"value_1": {"type": "number"}, "value_2": {"type": "number"}},
        "required": ["value_1", "value_2"],
    },
)


def reply(*calls: tuple[str, Any], content: str = "") -> dict[str, Any]:
    tool_calls = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            },
        }
        for i, (name, arguments) in enumerate(calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"choices": [{"index": 0, "message": message}]}


def test_a_valid_call_is_read_with_the_assistant_message_to_append() -> None:
    """One call of the bound tool with its exact fields yields the arguments and the message."""
    call = extract_tool_call(reply(("submit_pair_values", {"value_1": 3, "value_2": -2})), PAIR)
    assert call.arguments == {"value_1": 3, "value_2": -2}
    assert call.message["role"] == "assistant"
    assert call.message["tool_calls"][0]["id"] == call.call_id == "call_0"
    assert json.loads(call.message["tool_calls"][0]["function"]["arguments"]) == call.arguments


@pytest.mark.parametrize(
    ("the_reply", "kind"),
    [
        (reply(content="I would try 240."), "no_tool_call"),
        (reply(("submit_pair_values", {"value_1": 1, "value_2": 2})), "wrong_tool"),
        (
            reply(("submit_single_value", {"value": 1}), ("submit_single_value", {"value": 2})),
            "wrong_tool",
        ),
        (reply(("submit_single_value", {"val": 240})), "wrong_arguments"),
        (reply(("submit_single_value", {"value": 240, "extra": 1})), "wrong_arguments"),
        (reply(("submit_single_value", {"value": "240"})), "wrong_arguments"),
        (reply(("submit_single_value", {"value": True})), "wrong_arguments"),
        (reply(("submit_single_value", "{not json")), "wrong_arguments"),
        ({"choices": []}, "invalid_reply"),
        ({"error": "x"}, "invalid_reply"),
    ],
)
def test_unusable_replies_are_refused_with_their_kind(the_reply: dict[str, Any], kind: str) -> None:
    """Prose, wrong tools, wrong or non-numeric arguments and broken replies are refused."""
    with pytest.raises(ModelFailure) as caught:
        extract_tool_call(the_reply, SINGLE)
    assert caught.value.kind == kind


def test_the_request_body_follows_the_llama_server_contract() -> None:
    """The request carries the tool as a function, required tool choice, no parallel calls and
    the max_tokens cap."""
    client = ModelClient("http://127.0.0.1:1/", timeout=1.0, max_tokens=512)
    body = client.request_body([{"role": "user", "content": "hi"}], SINGLE)
    assert client.url == "http://127.0.0.1:1/v1/chat/completions"
    assert body == {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "submit_single_value",
                    "description": "Submit one value.",
                    "parameters": SINGLE.input_schema,
                },
            }
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "stream": False,
        "max_tokens": 512,
    }


def test_a_reply_cut_at_the_cap_is_a_length_failure_with_its_figure() -> None:
    """finish_reason "length" is a correctable failure of its own kind, whatever it holds."""
    cut = reply(("submit_single_value", {"value": 240}))
    cut["choices"][0]["finish_reason"] = "length"
    cut["usage"] = {"completion_tokens": 512}
    with pytest.raises(ModelFailure) as caught:
        extract_tool_call(cut, SINGLE)
    assert caught.value.kind == "length" and caught.value.correctable
    assert caught.value.facts == {"max_tokens": 512}


async def test_a_reply_slower_than_its_deadline_is_a_timeout() -> None:
    """The request's own deadline ends a reply that trickles in, however the bytes arrive."""
    import asyncio

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read(65536)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
            for _ in range(100):
                if reader.at_eof():
                    break
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.05)
        except ConnectionError:
            pass  # the client gave up at its deadline, as it should
        finally:
            writer.close()

    server = await asyncio.start_server(slow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = ModelClient(f"http://127.0.0.1:{port}", timeout=60.0)
    try:
        with pytest.raises(ModelFailure) as caught:
            await client.complete({"messages": []}, deadline=0.5)
        assert caught.value.kind == "timeout" and caught.value.facts["timeout_seconds"] == 0.5
        assert not caught.value.correctable
    finally:
        await client.close()
        server.close()
        await server.wait_closed()


async def test_an_unreachable_model_server_is_a_connection_error() -> None:
    """A refused connection is reported as a failure of kind connection_error, not raised raw."""
    from ax3l.testing.plugin import free_port

    client = ModelClient(f"http://127.0.0.1:{free_port()}", timeout=2.0)
    try:
        with pytest.raises(ModelFailure) as caught:
            await client.complete({"messages": []})
    finally:
        await client.close()
    assert caught.value.kind == "connection_error"


def _grammar_reply(content: str, finish_reason: str = "stop") -> dict[str, Any]:
    message = {"role": "assistant", "content": content}
    return {"id": "chatcmpl-1", "choices": [{"message": message, "finish_reason": finish_reason}]}


def test_a_grammar_reply_is_read_as_the_tools_call() -> None:
    """Under AX3L_LLM_GRAMMAR the content is the arguments object (after a reasoning end tag a
    server left in it); the conversation records it as a call of the tool."""
    call = extract_grammar_call(_grammar_reply('{"value_1": 0.96, "value_2": 0.97}'), PAIR)
    assert call.arguments == {"value_1": 0.96, "value_2": 0.97}
    assert call.message["tool_calls"][0]["function"]["name"] == "submit_pair_values"
    reasoned = extract_grammar_call(_grammar_reply('Hmm.\n</think>\n{"value": 240}'), SINGLE)
    assert reasoned.arguments == {"value": 240}


@pytest.mark.parametrize(
    ("content", "finish_reason", "kind"),
    [
        ("I would pick 240.", "stop", "no_tool_call"),
        ('{"value": "240"}', "stop", "wrong_arguments"),
        ('{"values": 240}', "stop", "wrong_arguments"),
        ('{"value": 2', "length", "length"),
    ],
)
def test_a_grammar_reply_a_server_did_not_enforce_is_a_model_failure(
    content: str, finish_reason: str, kind: str
) -> None:
    """A server that ignored the grammar answered in prose or with other arguments; a reply cut
    at the cap is a length failure, as with tools."""
    with pytest.raises(ModelFailure) as failure:
        extract_grammar_call(_grammar_reply(content, finish_reason), SINGLE)
    assert failure.value.kind == kind and failure.value.correctable


DEEP = "[" * 100_000 + "]" * 100_000
HOSTILE_BODIES = {
    "deeply nested": b'{"choices": [], "x": ' + DEEP.encode() + b"}",
    "nested a little too deep": b'{"choices": ' + b"[" * 70 + b"]" * 70 + b"}",
    "huge": b'{"choices": [], "x": "' + b"a" * (2 * 1024 * 1024) + b'"}',
    "binary": bytes(range(256)) * 8,
    "a lone surrogate": b'{"choices": [{"message": {"content": "\\ud800"}}]}',
}


async def serving(body: bytes) -> tuple[Any, int]:
    """A model server that answers every request 200 with ``body`` as JSON; it and its port."""
    import asyncio

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            head = (
                f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
            )
            writer.write(head.encode() + b"\r\nConnection: close\r\n\r\n" + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client stopped reading (a reply over its cap)
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("case", sorted(HOSTILE_BODIES))
async def test_a_hostile_reply_is_an_invalid_reply_never_a_crash(case: str) -> None:
    """M6: a reply nested 100,000 (or just 70) deep, over 1 MiB, binary, or holding a lone
    surrogate is a ModelFailure ``invalid_reply`` (which ends the conversation and counts
    toward the fallback), never a RecursionError or an error of the database later."""
    server, port = await serving(HOSTILE_BODIES[case])
    client = ModelClient(f"http://127.0.0.1:{port}", timeout=30.0)
    try:
        with pytest.raises(ModelFailure) as caught:
            await client.complete({"messages": []})
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
    assert caught.value.kind == "invalid_reply" and not caught.value.correctable
    assert len(caught.value.detail) < 2000


def test_tool_call_arguments_nested_deep_are_an_invalid_reply() -> None:
    """M6: a tool call whose arguments text nests 100,000 deep is ``invalid_reply``, not a
    RecursionError; arguments that are merely not JSON stay a correctable mistake."""
    with pytest.raises(ModelFailure) as caught:
        extract_tool_call(reply(("submit_single_value", '{"value": ' + DEEP + "}")), SINGLE)
    assert caught.value.kind == "invalid_reply" and not caught.value.correctable
    with pytest.raises(ModelFailure) as caught:
        extract_tool_call(reply(("submit_single_value", '{"value": 1')), SINGLE)
    assert caught.value.kind == "wrong_arguments"


def test_the_model_url_is_shown_without_its_secrets() -> None:
    """L6: what the events and the console show of AX3L_LLM_URL holds no user, password, query
    or fragment (where a hosted server's key would be)."""
    from ax3l.orchestrator.llm_client import shown_url

    assert shown_url("https://me:s3cret@llm.example.org:8443/v1?key=abc#x") == (
        "https://llm.example.org:8443/v1"
    )
    assert shown_url("http://127.0.0.1:27770") == "http://127.0.0.1:27770"
    assert shown_url("http://[::1]:27770/") == "http://[::1]:27770/"
