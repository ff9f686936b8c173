"""scripts/generate-mcp-config.py: its output starts a working, bound MCP server."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from ax3l.shared.registry import PARAMETER_ORDER

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "generate-mcp-config.py"


def test_script_offers_exactly_the_round_robin_entries():
    """The --parameter choices are the registry's seven entries."""
    spec = importlib.util.spec_from_file_location("generate_mcp_config", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.PARAMETERS == PARAMETER_ORDER


def generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, check=True, text=True
    )


async def test_generated_config_starts_a_bound_server():
    """The printed mcp.json launches the stdio server with the chosen binding and endpoint."""
    printed = generate(
        "--parameter", "epsilon_pair", "--endpoint", "tcp://127.0.0.1:1", "--python", sys.executable
    )
    (entry,) = json.loads(printed.stdout)["mcpServers"].values()
    assert "do not register" in printed.stderr
    assert entry["env"] == {
        "AX3L_CONVERSATION_PARAMETER": "epsilon_pair",
        "AX3L_ZMQ_ENDPOINT": "tcp://127.0.0.1:1",
    }
    server = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])
    async with Client(server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert "This conversation is assigned epsilon_pair" in tools["submit_pair_values"].description
