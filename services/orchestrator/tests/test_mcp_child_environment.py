"""The MCP child gets its binding, the broker's endpoint and the tool timeout: no secrets."""

from __future__ import annotations

import os
from pathlib import Path

from ax3l.orchestrator.mcp_session import MCP_MODULE, bound_session
from ax3l.shared.registry import ENTRIES
from ax3l.shared.settings import Settings
from ax3l.testing.plugin import free_port

# What the orchestrator's own environment holds under `make run` and must stay there.
PARENT_SECRETS = {
    "DB_HOST": "127.0.0.1",
    "DB_USER": "ax3l",
    "DB_PASSWORD": "rw-secret",
    "AX3L_DB_NAME": "ax3l",
    "AX3L_SNAKELAB_DB_NAME": "snakelab",
    "AX3L_DB_ADMIN_USER": "ax3l_admin",
    "AX3L_DB_ADMIN_PASSWORD": "admin-secret",
    "AX3L_REPORTS_DB_PASSWORD": "reports-secret",
    "SNAKELAB_DB_PASSWORD": "snakelab-secret",
    "AX3L_LLM_URL": "http://127.0.0.1:1",
    "AX3L_TEST_CRASH_AT": "never",
}
ALLOWED = {
    "AX3L_CONVERSATION_PARAMETER",
    "AX3L_ZMQ_ENDPOINT",
    "AX3L_ZMQ_TIMEOUT",
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
}


def _children_environments(module: str) -> list[dict[str, str]]:
    """The environments of this process's children running ``python -m module``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            raw = (proc / "environ").read_bytes()
        except OSError:
            continue
        if parent == os.getpid() and module.encode() in cmdline:
            pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
            found.append({key.decode(): value.decode() for key, _, value in pairs})
    return found


async def test_mcp_child_environment_has_no_database_or_admin_setting(monkeypatch):
    """A real MCP child's environment (read from /proc) holds only its binding and basics."""
    for key, value in PARENT_SECRETS.items():
        monkeypatch.setenv(key, value)
    entry = ENTRIES[0]
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    settings = Settings(AX3L_ZMQ_ENDPOINT=endpoint, AX3L_ZMQ_TIMEOUT=7)
    async with bound_session(entry, settings) as session:
        assert session.tool.name == entry.tool_name
        environments = _children_environments(MCP_MODULE)
    assert len(environments) == 1
    child = environments[0]
    assert set(child) - ALLOWED - {key for key in child if key.startswith("LC_")} == set()
    assert not [key for key in child if key.startswith(("DB_", "SNAKELAB_")) or "DB_" in key]
    assert not [value for value in child.values() if "secret" in value]
    assert child["AX3L_CONVERSATION_PARAMETER"] == entry.name
    assert child["AX3L_ZMQ_ENDPOINT"] == endpoint
    assert float(child["AX3L_ZMQ_TIMEOUT"]) == 7
