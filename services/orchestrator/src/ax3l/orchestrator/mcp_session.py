"""A private MCP stdio session per conversation, bound to its single or pair.

The MCP server is a child process with the environment that binds it:
``AX3L_CONVERSATION_PARAMETER`` (the entry) and ``AX3L_ZMQ_ENDPOINT`` (the broker). It is
forked from a pre-imported parent (``mcp_fork.py``, ``AX3L_MCP_SPAWN=fork``, the default) or
started as a new interpreter (``exec``). Its one tool is discovered with ``list_tools``; the
definition sent to the model is exactly that.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from mcp import Client, MCPError, StdioServerParameters
from mcp.client._transport import Transport
from mcp.client.stdio import get_default_environment

from ax3l.app.snakelab.tools.binding import BINDING_ENV
from ax3l.orchestrator.mcp_fork import forked_stdio, zygote_for
from ax3l.shared import untrusted_json
from ax3l.shared.registry import Entry
from ax3l.shared.settings import OrchestratorSettings
from ax3l.shared.stack.spec import BASIC_KEYS, process_env
from ax3l.shared.tool_channel import client_endpoint

MCP_MODULE = "ax3l.app.snakelab.tools"
# Seconds a session opened in advance has to answer before it is handed over.
PING_TIMEOUT = 5.0


class ToolSessionFailed(RuntimeError):
    """The MCP session could not be started, its tool is missing, or a call failed."""


@dataclass(frozen=True)
class ToolDefinition:
    """The bound tool as discovered from the MCP server."""

    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def argument_names(self) -> tuple[str, ...]:
        return tuple(self.input_schema.get("properties", {}))

    def for_model(self) -> dict[str, Any]:
        """The tool in the chat-completions ``tools`` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }


@dataclass(frozen=True)
class ToolReply:
    """The tool's result: the broker's payload (parsed) and the text it came as."""

    text: str
    payload: dict[str, Any]

    @property
    def accepted(self) -> bool:
        return self.payload.get("status") == "ok" and isinstance(self.payload.get("run_id"), str)

    @property
    def rejected(self) -> bool:
        return self.payload.get("status") == "rejected"


@dataclass(eq=False)
class BoundSession:
    """An open MCP session and its discovered tool, with its timings."""

    _client: Client
    tool: ToolDefinition
    call_timeout: float
    spawn_seconds: float
    close_seconds: float | None = None
    # Set by the session pool: started before its conversation, and how long that
    # conversation waited for it.
    prepared: bool = False
    wait_seconds: float | None = None

    async def alive(self) -> bool:
        """Whether the child still answers (a fresh tool listing, as the protocol has no ping
        any more): a session opened in advance may have lost its child while it waited."""
        try:
            async with asyncio.timeout(PING_TIMEOUT):
                await self._client.list_tools(cache_mode="bypass")
        except Exception:
            return False  # whatever failed, the session cannot be used
        return True

    async def call(self, arguments: dict[str, Any]) -> ToolReply:
        """Call the bound tool once (never retried: the broker may have acted on it)."""
        try:
            result = await self._client.call_tool(
                self.tool.name, arguments, read_timeout_seconds=self.call_timeout
            )
        except MCPError as exc:
            raise ToolSessionFailed(f"{self.tool.name}: MCP error {exc.code}: {exc}") from exc
        except (TimeoutError, OSError) as exc:
            raise ToolSessionFailed(f"{self.tool.name}: {type(exc).__name__}: {exc}") from exc
        text = "".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            raise ToolSessionFailed(f"{self.tool.name} failed: {text or 'no detail'}")
        try:
            payload = untrusted_json.loads(text)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            if isinstance(result.structured_content, dict):
                payload = result.structured_content
            else:
                raise ToolSessionFailed(f"{self.tool.name} answered something unreadable: {text!r}")
        return ToolReply(text, payload)


def child_environment(entry: Entry | None, settings: OrchestratorSettings) -> dict[str, str]:
    """Exactly what the MCP child reads: its binding, the broker's endpoint, the tool timeout
    and the schema file, plus what a Python process needs (least privilege). Without
    ``entry``: the zygote's, which binds each child it forks."""
    # The basics alone (the stack's one list): no database setting, no admin login, no test hook.
    env = process_env(os.environ, BASIC_KEYS)
    if entry is not None:
        env[BINDING_ENV] = entry.name
    env.update(
        AX3L_ZMQ_ENDPOINT=client_endpoint(settings),
        AX3L_ZMQ_TIMEOUT=str(settings.zmq_timeout),
    )
    if settings.schema_path is not None:
        # The tool's descriptions name the ranges of the orchestrator's schema.
        env["AX3L_SCHEMA_PATH"] = str(settings.schema_path)
    return env


def _transport(entry: Entry, settings: OrchestratorSettings) -> StdioServerParameters | Transport:
    """How the child for ``entry`` starts (``AX3L_MCP_SPAWN``): forked from the zygote, or a
    new interpreter through the SDK's stdio client."""
    if settings.mcp_spawn == "fork":
        zygote = zygote_for(get_default_environment() | child_environment(None, settings))
        return forked_stdio(zygote, entry.name)
    return StdioServerParameters(
        command=sys.executable, args=["-m", MCP_MODULE], env=child_environment(entry, settings)
    )


@asynccontextmanager
async def bound_session(
    entry: Entry, settings: OrchestratorSettings, timings: list[BoundSession] | None = None
) -> AsyncIterator[BoundSession]:
    """Start the MCP child for ``entry``, discover its tool, and close the child afterwards.

    A cleanly closed session is appended to ``timings`` (spawn and close seconds are measured).
    """
    if timings is None:
        timings = []
    began = time.perf_counter()
    try:
        async with Client(
            _transport(entry, settings), read_timeout_seconds=settings.mcp_call_timeout
        ) as client:
            try:
                listing = await client.list_tools()
            except (MCPError, TimeoutError, OSError) as exc:
                raise ToolSessionFailed(f"listing the MCP tools failed: {exc}") from exc
            found = [tool for tool in listing.tools if tool.name == entry.tool_name]
            if not found:
                names = [tool.name for tool in listing.tools]
                raise ToolSessionFailed(
                    f"the MCP server bound to {entry.name} offers {names}, not {entry.tool_name}"
                )
            tool = found[0]
            definition = ToolDefinition(tool.name, tool.description or "", dict(tool.input_schema))
            session = BoundSession(
                client, definition, settings.mcp_call_timeout, time.perf_counter() - began
            )
            try:
                yield session
            finally:
                closing = time.perf_counter()
        session.close_seconds = time.perf_counter() - closing
        timings.append(session)
    except BaseExceptionGroup as group:
        # The SDK's task group wraps whatever left the session, ours included: unwrap it.
        raise _single(group, entry) from None
    except (MCPError, OSError) as exc:  # ForkFailed is an OSError
        raise ToolSessionFailed(f"the MCP session for {entry.name} failed: {exc}") from exc


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def _single(group: BaseExceptionGroup, entry: Entry) -> BaseException:
    leaves = _leaves(group)
    if len(leaves) == 1:
        leaf = leaves[0]
        if isinstance(leaf, (MCPError, OSError)):
            return ToolSessionFailed(f"the MCP session for {entry.name} failed: {leaf}")
        return leaf
    return ToolSessionFailed(
        f"the MCP session for {entry.name} failed: " + "; ".join(repr(e) for e in leaves)
    )
