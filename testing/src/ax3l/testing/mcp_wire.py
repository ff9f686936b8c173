"""Raw MCP messages for tests that speak JSON-RPC to a server by hand (stdio, a forked child,
the seats' HTTP endpoint) rather than through the SDK's client."""

from __future__ import annotations

from typing import Any

PROTOCOL_VERSION = "2025-06-18"


def initialize(request_id: int = 1) -> dict[str, Any]:
    """The client's ``initialize`` request."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call_tool(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A ``tools/call`` request."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
