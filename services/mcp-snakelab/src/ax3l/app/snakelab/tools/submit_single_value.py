"""SubmitSingleValue: ``submit_single_value(value)`` for the session's single parameter."""

from __future__ import annotations

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult

from ax3l.app.snakelab.tools.binding import Binding
from ax3l.app.snakelab.tools.forwarding import forward
from ax3l.shared.tool_channel import ZMQClient

METHOD = "submit_single_value"


class SubmitSingleValue:
    """Checks the binding and forwards ``{"parameter": <bound name>, "value": value}``."""

    def __init__(self, binding: Binding, client: ZMQClient):
        self.binding = binding
        self.client = client

    async def __call__(self, value: int | float) -> CallToolResult:
        refusal = self.binding.refusal("single")
        if refusal:
            raise ToolError(refusal)
        assert self.binding.entry is not None
        return await forward(
            self.client, METHOD, {"parameter": self.binding.entry.name, "value": value}
        )
