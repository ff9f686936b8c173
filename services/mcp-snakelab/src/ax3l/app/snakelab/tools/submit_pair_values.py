"""SubmitPairValues: ``submit_pair_values(value_1, value_2)`` for the session's pair.

The model supplies only the two numbers; the pair's identity comes from the binding.
"""

from __future__ import annotations

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult

from ax3l.app.snakelab.tools.binding import Binding
from ax3l.app.snakelab.tools.forwarding import forward
from ax3l.shared.tool_channel import ZMQClient

METHOD = "submit_pair_values"


class SubmitPairValues:
    """Checks the binding and forwards ``{"pair": <bound name>, "value_1", "value_2"}``."""

    def __init__(self, binding: Binding, client: ZMQClient):
        self.binding = binding
        self.client = client

    async def __call__(self, value_1: int | float, value_2: int | float) -> CallToolResult:
        refusal = self.binding.refusal("pair")
        if refusal:
            raise ToolError(refusal)
        assert self.binding.entry is not None
        return await forward(
            self.client,
            METHOD,
            {"pair": self.binding.entry.name, "value_1": value_1, "value_2": value_2},
        )
