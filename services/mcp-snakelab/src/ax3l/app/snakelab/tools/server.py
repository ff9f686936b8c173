"""The SnakeLab MCP stdio server: ``python -m ax3l.app.snakelab.tools`` or ``ax3l-mcp-snakelab``.

Domain tools are registered here with ``@mcp.tool()`` (``register_submit_tools``), typed once
for both MCP servers Ax3l runs: this one, a conversation's session bound to one entry, whose
``submit`` checks the binding and forwards to the broker (``forwarding.py``); and the
seats' endpoint (``ax3l.orchestrator.seat_server``), whose callback admits the seat and checks
the open turn. The argument types are strict JSON numbers (integers or decimals: strings,
booleans, null and lists fail validation before a tool body runs), and a value that is not
finite is refused before anything is forwarded (``wire.number_problem``; the payload is
``wire.payload_for``). Descriptions are each server's own: here they
are built at start from the session's binding and SnakeLab's schema.
Requests go to ``AX3L_ZMQ_ENDPOINT``, else the zmq binding in Ax3l's config file, else
tcp://127.0.0.1:61970, bounded by ``AX3L_ZMQ_TIMEOUT`` (15 s). stdout carries only the MCP
protocol; logs go to stderr.
"""

# No ``from __future__ import annotations`` here: the tool signatures below use local
# values in ``Annotated`` metadata, which must be evaluated when the functions are defined.

import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import StrictFloat, StrictInt, WithJsonSchema

from ax3l.app.snakelab.tools.binding import Binding, binding_from_env
from ax3l.app.snakelab.tools.descriptions import (
    pair_description,
    single_description,
    value_description,
)
from ax3l.app.snakelab.tools.forwarding import forward
from ax3l.shared.config_schema import ConfigSchema, SchemaFileError, cached_schema
from ax3l.shared.registry import EntryKind
from ax3l.shared.settings import McpServerSettings, mcp_server_settings
from ax3l.shared.tool_channel import ZMQClient, client_endpoint
from ax3l.shared.wire import number_problem, payload_for

logger = logging.getLogger("ax3l.mcp_snakelab")

SERVER_NAME = "ax3l-snakelab"
INSTRUCTIONS = (
    "Ax3l's SnakeLab tools. Each conversation is assigned one single parameter or one pair;"
    " submit its new value(s) with the matching tool. Ax3l validates, rejects repeats and"
    " starts the SnakeLab run."
)


Values = dict[str, int | float]
# A server's submission: the entry kind and the values by argument name.
Submit = Callable[[EntryKind, Values], Awaitable[CallToolResult]]


@dataclass(frozen=True)
class SubmitTexts:
    """The descriptions a server gives the two tools and their three arguments."""

    single: str
    pair: str
    value: str
    value_1: str
    value_2: str


def number(description: str) -> object:
    """A strict JSON number argument (one clean ``number`` type in the schema the model reads)."""
    return Annotated[
        StrictInt | StrictFloat, WithJsonSchema({"type": "number", "description": description})
    ]


def register_submit_tools(mcp: MCPServer, texts: SubmitTexts, submit: Submit) -> None:
    """Register ``submit_single_value`` and ``submit_pair_values`` on ``mcp``."""
    value_type = number(texts.value)
    value_1_type = number(texts.value_1)
    value_2_type = number(texts.value_2)

    async def checked(kind: EntryKind, values: Values) -> CallToolResult:
        problems = [p for name, value in values.items() if (p := number_problem(name, value))]
        if problems:
            raise ToolError("; ".join(problems))
        return await submit(kind, values)

    @mcp.tool(description=texts.single)
    async def submit_single_value(value: value_type) -> CallToolResult:  # type: ignore[valid-type]
        return await checked("single", {"value": value})

    @mcp.tool(description=texts.pair)
    async def submit_pair_values(
        value_1: value_1_type,  # type: ignore[valid-type]
        value_2: value_2_type,  # type: ignore[valid-type]
    ) -> CallToolResult:
        return await checked("pair", {"value_1": value_1, "value_2": value_2})


def build_server(binding: Binding, schema: ConfigSchema, client: ZMQClient) -> MCPServer:
    """The MCP server for one session."""
    mcp = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    async def submit(kind: EntryKind, values: Values) -> CallToolResult:
        # Forwards the bound entry's payload to its method, once the binding allows ``kind``.
        refusal = binding.refusal(kind)
        if refusal:
            raise ToolError(refusal)
        assert binding.entry is not None
        payload = payload_for(binding.entry, values)
        return await forward(client, binding.entry.tool_name, payload)

    texts = SubmitTexts(
        single=single_description(binding, schema),
        pair=pair_description(binding, schema),
        value=value_description(binding, "single", 0),
        value_1=value_description(binding, "pair", 0),
        value_2=value_description(binding, "pair", 1),
    )
    register_submit_tools(mcp, texts, submit)
    return mcp


def build_from_settings(settings: McpServerSettings) -> MCPServer:
    """The server as configured by the environment."""
    schema = cached_schema(settings.schema_file())
    client = ZMQClient(client_endpoint(settings), timeout=settings.zmq_timeout)
    return build_server(binding_from_env(), schema, client)


def main() -> int:
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = mcp_server_settings()
    try:
        server = build_from_settings(settings)
    except SchemaFileError as exc:
        print(f"ax3l-mcp-snakelab: {exc}", file=sys.stderr)
        return 2
    server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
