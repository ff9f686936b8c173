"""Forwarding a submission to Ax3l over the tool channel and shaping the MCP result.

The reply payload comes back as JSON text, unchanged: acceptance and rejection are Ax3l's
decisions. A broker protocol error (``{"error": ...}``) is returned the same way but flagged
``isError``; a transport failure (timeout, bad endpoint, malformed reply) is a tool error
whose text says what failed. Nothing is retried: a timed-out request may have been processed.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from ax3l.shared.tool_channel import ToolChannelError, ZMQClient

logger = logging.getLogger(__name__)


async def forward(client: ZMQClient, method: str, payload: dict[str, Any]) -> CallToolResult:
    """Send one request to Ax3l and return its reply payload as the tool result."""
    try:
        reply = await client.call(method, payload)
    except ToolChannelError as exc:
        logger.warning("%s not delivered: %s", method, exc)
        raise ToolError(f"{method} could not reach Ax3l: {exc}") from None
    return tool_result(reply)


def tool_result(reply: dict[str, Any]) -> CallToolResult:
    """Ax3l's reply payload as the tool's result: its JSON text, flagged ``isError`` for a
    broker protocol error (``{"error": ...}``). Both MCP servers answer with it."""
    text = json.dumps(reply, ensure_ascii=False)
    return CallToolResult(content=[TextContent(text=text)], is_error="error" in reply)
