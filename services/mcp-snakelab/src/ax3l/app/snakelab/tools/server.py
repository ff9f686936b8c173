"""The SnakeLab MCP stdio server: ``python -m ax3l.app.snakelab.tools`` or ``ax3l-mcp-snakelab``.

Domain tools are registered here with ``@mcp.tool()``. Their descriptions are built at start
from the session's binding and SnakeLab's schema; the argument types are strict JSON numbers
(integers or decimals: strings and booleans fail validation before the tool body runs).
Requests go to ``AX3L_ZMQ_ENDPOINT``, else the zmq binding in Ax3l's config file, else
tcp://127.0.0.1:61970, bounded by ``AX3L_ZMQ_TIMEOUT`` (15 s). stdout carries only the MCP
protocol; logs go to stderr.
"""

# No ``from __future__ import annotations`` here: the tool signatures below use local
# values in ``Annotated`` metadata, which must be evaluated when the functions are defined.

import logging
import sys
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import StrictFloat, StrictInt, WithJsonSchema

from ax3l.app.snakelab.tools.binding import Binding, binding_from_env
from ax3l.app.snakelab.tools.descriptions import (
    pair_description,
    single_description,
    value_description,
)
from ax3l.app.snakelab.tools.submit_pair_values import SubmitPairValues
from ax3l.app.snakelab.tools.submit_single_value import SubmitSingleValue
from ax3l.shared.config_schema import ConfigSchema, SchemaFileError, cached_schema
from ax3l.shared.settings import Settings, get_settings
from ax3l.shared.tool_channel import ZMQClient, client_endpoint

logger = logging.getLogger("ax3l.mcp_snakelab")

SERVER_NAME = "ax3l-snakelab"
INSTRUCTIONS = (
    "Ax3l's SnakeLab tools. Each conversation is assigned one single parameter or one pair;"
    " submit its new value(s) with the matching tool. Ax3l validates, rejects repeats and"
    " starts the SnakeLab run."
)


def _number(description: str) -> object:
    # One clean JSON-schema type for the model; the strict union does the validation.
    return Annotated[
        StrictInt | StrictFloat, WithJsonSchema({"type": "number", "description": description})
    ]


def build_server(binding: Binding, schema: ConfigSchema, client: ZMQClient) -> MCPServer:
    """The MCP server for one session."""
    mcp = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    single = SubmitSingleValue(binding, client)
    pair = SubmitPairValues(binding, client)
    value_type = _number(value_description(binding, "single", 0))
    value_1_type = _number(value_description(binding, "pair", 0))
    value_2_type = _number(value_description(binding, "pair", 1))

    @mcp.tool(description=single_description(binding, schema))
    async def submit_single_value(value: value_type) -> CallToolResult:  # type: ignore[valid-type]
        return await single(value)

    @mcp.tool(description=pair_description(binding, schema))
    async def submit_pair_values(
        value_1: value_1_type,  # type: ignore[valid-type]
        value_2: value_2_type,  # type: ignore[valid-type]
    ) -> CallToolResult:
        return await pair(value_1, value_2)

    return mcp


def build_from_settings(settings: Settings) -> MCPServer:
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
    settings = get_settings()
    try:
        server = build_from_settings(settings)
    except SchemaFileError as exc:
        print(f"ax3l-mcp-snakelab: {exc}", file=sys.stderr)
        return 2
    server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
