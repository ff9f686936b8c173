#!/usr/bin/env python3
"""Print an ``mcp.json`` that starts Ax3l's SnakeLab MCP server, for standalone testing.

    python scripts/generate-mcp-config.py --parameter gamma > mcp.json
    python scripts/generate-mcp-config.py --parameter reward_pair --endpoint tcp://127.0.0.1:61970

The entry runs ``<python> -m ax3l.app.snakelab.tools`` over stdio with
``AX3L_CONVERSATION_PARAMETER`` (the single parameter or pair the session may submit; without
it the tools are listed but refuse submissions) and, when given, ``AX3L_ZMQ_ENDPOINT``
(otherwise the server uses the zmq binding in Ax3l's config file, else
tcp://127.0.0.1:61970). Submissions go to a running ``ax3l-toolbroker``.

Do not register this output with llama-server's web chat client: the optimisation loop
starts its own bound sessions, and the web client must not be able to submit runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"

try:
    from ax3l.shared.registry import PARAMETER_ORDER as PARAMETERS
except ImportError:
    # Started by a Python without Ax3l (``python3 scripts/...``): run in the checkout's venv.
    if not (VENV / "bin" / "python").exists() or Path(sys.prefix).resolve() == VENV.resolve():
        raise
    os.execv(VENV / "bin" / "python", [str(VENV / "bin" / "python"), __file__, *sys.argv[1:]])


def default_python() -> str:
    venv = VENV / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def build(parameter: str | None, endpoint: str | None, python: str, name: str) -> dict:
    env: dict[str, str] = {}
    if parameter:
        env["AX3L_CONVERSATION_PARAMETER"] = parameter
    if endpoint:
        env["AX3L_ZMQ_ENDPOINT"] = endpoint
    server: dict[str, object] = {"command": python, "args": ["-m", "ax3l.app.snakelab.tools"]}
    if env:
        server["env"] = env
    return {"mcpServers": {name: server}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Print an mcp.json for Ax3l's SnakeLab MCP server (standalone testing only)."
    )
    parser.add_argument(
        "--parameter",
        choices=PARAMETERS,
        help="the single parameter or pair the session may submit (omit for an unbound session)",
    )
    parser.add_argument("--endpoint", help="Ax3l's tool endpoint, e.g. tcp://127.0.0.1:61970")
    parser.add_argument("--python", default=default_python(), help="interpreter with Ax3l")
    parser.add_argument("--name", default="ax3l-snakelab", help="server name in mcp.json")
    args = parser.parse_args(argv)
    print(json.dumps(build(args.parameter, args.endpoint, args.python, args.name), indent=2))
    print(
        "generate-mcp-config: for standalone MCP testing only; do not register this with"
        " llama-server's web client.",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
