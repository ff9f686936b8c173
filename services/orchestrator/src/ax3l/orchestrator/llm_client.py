"""The request to the model server (llama-server's OpenAI-compatible chat completions).

One request carries the whole conversation so far and the one discovered tool, with
``tool_choice: "required"``, ``parallel_tool_calls: false`` and a ``max_tokens`` cap, and is
bounded by its own deadline. A usable reply holds exactly one call of that tool whose arguments
are exactly the tool's fields, each a JSON number.

Under ``AX3L_LLM_GRAMMAR`` the request carries a GBNF ``grammar`` instead of the tool
(llama-server refuses a grammar beside tools unless ``tool_choice`` is ``none``, and its
tool-call grammar lets prose precede the call and leaves numbers unbounded), and the reply's
visible content is the call's arguments as one JSON object (``extract_grammar_call``); the
reasoning stays in ``reasoning_content``.

Failures come in two audiences. What the model did wrong (prose, a wrong tool, wrong arguments,
a reply cut at the cap) is ``correctable``: the conversation tells the model and asks again.
What the server did (timeouts, HTTP errors, unreadable replies, a context overflow) ends the
conversation.

A reply is untrusted text: it is read up to ``MAX_REPLY_BYTES`` (more is an invalid reply, read
no further), and it and its tool call's arguments are parsed by ``untrusted_json``, so a reply
nested thousands deep, binary, or holding what no database can store is an ``invalid_reply``
(which ends the conversation and counts toward the fallback), never an exception of another
kind that would fail the loop's step.
"""

from __future__ import annotations

import asyncio
import json
import math
import urllib.parse
from dataclasses import dataclass
from typing import Any

import httpx

from ax3l.orchestrator.mcp_session import ToolDefinition
from ax3l.orchestrator.prompt_budget import is_context_overflow
from ax3l.orchestrator.reply_grammar import REASONING_END
from ax3l.shared import untrusted_json

BODY_EXCERPT = 500
# The most of a reply read (a reply with 4,096 tokens of reasoning is some 20 KB).
MAX_REPLY_BYTES = 1024 * 1024

# Mistakes of the model that a correction prompt in the same conversation may fix.
CORRECTABLE = frozenset({"no_tool_call", "wrong_tool", "wrong_arguments", "length"})


class ModelFailure(RuntimeError):
    """The model's answer cannot be used; ``kind`` says how (also stored in the event)."""

    def __init__(
        self,
        kind: str,
        detail: str,
        reply: Any = None,
        http_status: int | None = None,
        facts: dict[str, Any] | None = None,
    ):
        self.kind = kind
        self.detail = detail
        self.reply = reply
        self.http_status = http_status
        # Figures the event log reads as a sentence ("timed out after 300 s").
        self.facts = facts or {}
        super().__init__(f"{kind}: {detail}")

    @property
    def correctable(self) -> bool:
        """The model, not the server, got it wrong: say so in the conversation and ask again."""
        return self.kind in CORRECTABLE


@dataclass(frozen=True)
class ToolCall:
    """The model's one valid call of the bound tool."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str
    message: dict[str, Any]  # the assistant message, as it is appended to the conversation


class ModelClient:
    """POSTs chat completions to one model server."""

    def __init__(self, url: str, timeout: float, model: str | None = None, max_tokens: int = 4096):
        self.base_url = url.rstrip("/")
        self.url = self.base_url + "/v1/chat/completions"
        self.model = model
        self.timeout = timeout
        self.max_tokens = max_tokens
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout))

    async def close(self) -> None:
        await self._http.aclose()

    @property
    def http(self) -> httpx.AsyncClient:
        """The client's connection pool, for the model server's other endpoints (``/props``):
        a new ``httpx.AsyncClient`` per request would build a TLS context each time."""
        return self._http

    def request_body(
        self, messages: list[dict[str, Any]], tool: ToolDefinition, grammar: str | None = None
    ) -> dict[str, Any]:
        """The request: with the tool (tool calling), or with ``grammar`` instead of it."""
        body: dict[str, Any] = {"messages": messages}
        if grammar is None:
            body |= {"tools": [tool.for_model()], "tool_choice": "required"}
            body["parallel_tool_calls"] = False
        else:
            body["grammar"] = grammar
        body |= {"stream": False, "max_tokens": self.max_tokens}
        if self.model:
            body["model"] = self.model
        return body

    async def complete(self, body: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
        """The reply JSON, or ModelFailure for timeouts, HTTP errors and unreadable replies.

        The request ends after ``deadline`` seconds (default: the client's timeout) however the
        server trickles its bytes: httpx's own timeout is per read, not per request.
        """
        seconds = self.timeout if deadline is None else max(0.001, min(deadline, self.timeout))
        try:
            async with (
                asyncio.timeout(seconds),
                self._http.stream("POST", self.url, json=body) as response,
            ):
                status, raw = response.status_code, await _read_capped(response)
        except (httpx.TimeoutException, TimeoutError) as exc:
            raise ModelFailure(
                "timeout", f"no reply within {seconds:g} s", facts={"timeout_seconds": seconds}
            ) from exc
        except httpx.HTTPError as exc:
            raise ModelFailure("connection_error", f"{type(exc).__name__}: {exc}") from exc
        if raw is None:
            raise ModelFailure("invalid_reply", f"the reply is over {MAX_REPLY_BYTES:,} bytes")
        text = raw[: 4 * BODY_EXCERPT].decode("utf-8", "replace")[:BODY_EXCERPT]
        if status >= 400:
            raise ModelFailure(
                "context_overflow" if is_context_overflow(status, text) else "http_error",
                f"HTTP {status}: {text}",
                http_status=status,
            )
        try:
            reply = untrusted_json.loads(raw)
        except untrusted_json.UnsafeJSON as exc:
            raise ModelFailure("invalid_reply", f"the reply is unusable JSON: {exc}") from None
        except ValueError:
            raise ModelFailure("invalid_reply", f"the reply is not JSON: {text!r}") from None
        if not isinstance(reply, dict):
            raise ModelFailure("invalid_reply", "the reply is not a JSON object", reply)
        return reply


def shown_url(url: str) -> str:
    """``url`` as it may be logged, stored in an event or printed: without a user, password,
    query or fragment (where a hosted server's key would be)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


async def _read_capped(response: httpx.Response) -> bytes | None:
    """The response's body, or None once it is over ``MAX_REPLY_BYTES`` (read no further)."""
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value)


def _message(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply's first message, else ModelFailure (no message, or cut at the cap)."""
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelFailure("invalid_reply", "the reply has no choices", reply)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ModelFailure("invalid_reply", "the reply's first choice has no message", reply)
    if choices[0].get("finish_reason") == "length":
        usage = reply.get("usage")
        tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
        raise ModelFailure(
            "length",
            f"the reply was cut at the max_tokens cap ({tokens} completion tokens)",
            reply,
            facts={"max_tokens": tokens},
        )
    return message


def _checked_arguments(raw_text: str, arguments: Any, tool: ToolDefinition, reply: Any) -> None:
    """ModelFailure unless ``arguments`` is an object of exactly the tool's fields, numbers."""
    if not isinstance(arguments, dict):
        raise ModelFailure("wrong_arguments", f"the arguments are not an object: {raw_text}", reply)
    expected = set(tool.argument_names)
    if set(arguments) != expected:
        raise ModelFailure(
            "wrong_arguments",
            f"the arguments {sorted(arguments)} are not exactly {sorted(expected)}",
            reply,
        )
    bad = {k: v for k, v in arguments.items() if not _is_number(v)}
    if bad:
        raise ModelFailure("wrong_arguments", f"not JSON numbers: {json.dumps(bad)}", reply)


def _call(
    call_id: str, tool: ToolDefinition, arguments: dict[str, Any], raw: str, content: str = ""
) -> ToolCall:
    """The call, with the assistant message that states it in the conversation."""
    assistant = {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": tool.name, "arguments": raw}}
        ],
    }
    return ToolCall(call_id, tool.name, arguments, raw, assistant)


def extract_grammar_call(reply: dict[str, Any], tool: ToolDefinition) -> ToolCall:
    """The call of ``tool`` that a grammar-constrained ``reply`` states: its visible content is
    the arguments as one JSON object (after the reasoning's end tag, if the server left it). A
    server that ignored the grammar answered in prose (``no_tool_call``) or with other
    arguments (``wrong_arguments``)."""
    message = _message(reply)
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    # A server that leaves the reasoning in the content (--reasoning-format none): the answer
    # is what follows its end.
    text = text.rsplit(REASONING_END, 1)[-1].strip()
    not_json = "the reply is not the arguments object"
    arguments = _arguments_json(text, "no_tool_call", not_json, reply)
    _checked_arguments(text, arguments, tool, reply)
    call_id = str(reply.get("id") or "grammar_0")
    return _call(call_id, tool, arguments, text)


def _arguments_json(text: str, kind: str, problem: str, reply: dict[str, Any]) -> Any:
    """The arguments' JSON; text that is not JSON is a ``kind`` failure, JSON no reader should
    take (too deep, too big, binary) an ``invalid_reply``."""
    try:
        return untrusted_json.loads(text)
    except untrusted_json.UnsafeJSON as exc:
        raise ModelFailure("invalid_reply", f"the arguments are unusable JSON: {exc}") from None
    except ValueError:
        raise ModelFailure(kind, f"{problem}: {text[:BODY_EXCERPT]!r}", reply) from None


def extract_tool_call(reply: dict[str, Any], tool: ToolDefinition) -> ToolCall:
    """The one valid call of ``tool`` in ``reply``, else ModelFailure saying what is wrong."""
    message = _message(reply)
    calls = message.get("tool_calls") or []
    if not calls:
        content = str(message.get("content") or "")[:BODY_EXCERPT]
        raise ModelFailure("no_tool_call", f"the model answered in prose: {content!r}", reply)
    if len(calls) != 1:
        raise ModelFailure("wrong_tool", f"the model made {len(calls)} tool calls, not 1", reply)
    call = calls[0]
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise ModelFailure("wrong_tool", "the tool call has no function", reply)
    name = function.get("name")
    if name != tool.name:
        raise ModelFailure("wrong_tool", f"the model called {name!r}, not {tool.name!r}", reply)
    raw = function.get("arguments")
    if isinstance(raw, dict):
        arguments: Any = raw
        raw_text = json.dumps(raw)
    else:
        raw_text = str(raw)
        not_json = "the arguments are not JSON"
        arguments = _arguments_json(raw_text, "wrong_arguments", not_json, reply)
    _checked_arguments(raw_text, arguments, tool, reply)
    content = str(message.get("content") or "")
    return _call(str(call.get("id") or "call_0"), tool, arguments, raw_text, content)
