"""The MCP child gets its binding, the broker's endpoint and the tool timeout: no secrets."""

from __future__ import annotations

import os

import pytest

from ax3l.orchestrator.mcp_session import bound_session
from ax3l.shared.registry import ENTRIES
from ax3l.shared.settings import Settings
from ax3l.testing.mcp_children import mcp_processes
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


def _descendant_environments(endpoint: str) -> list[dict[str, str]]:
    """The environments (as exec'd) of this process's MCP descendants for ``endpoint``: the
    MCP child, or the zygote and the child it forked."""
    table = mcp_processes()

    def ours(pid: int) -> bool:
        while pid in table:
            pid = table[pid].parent
        return pid == os.getpid()

    return [
        proc.environ
        for pid, proc in table.items()
        if ours(pid) and proc.environ.get("AX3L_ZMQ_ENDPOINT") == endpoint
    ]


@pytest.mark.parametrize("spawn", ["exec", "fork"])
async def test_mcp_child_environment_has_no_database_or_admin_setting(monkeypatch, spawn):
    """A real MCP child's environment (read from /proc) holds only its binding and basics;
    forked, so do the zygote's and the child's, and the binding is set in the child."""
    for key, value in PARENT_SECRETS.items():
        monkeypatch.setenv(key, value)
    entry = ENTRIES[0]
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    settings = Settings(AX3L_ZMQ_ENDPOINT=endpoint, AX3L_ZMQ_TIMEOUT=7, AX3L_MCP_SPAWN=spawn)
    async with bound_session(entry, settings) as session:
        assert session.tool.name == entry.tool_name
        # The description names the bound entry: the child read its binding.
        assert f"for {entry.name}, the parameter assigned" in session.tool.description
        environments = _descendant_environments(endpoint)
    assert len(environments) == (1 if spawn == "exec" else 2)
    for child in environments:
        assert set(child) - ALLOWED - {key for key in child if key.startswith("LC_")} == set()
        assert not [key for key in child if key.startswith(("DB_", "SNAKELAB_")) or "DB_" in key]
        assert not [value for value in child.values() if "secret" in value]
        assert child["AX3L_ZMQ_ENDPOINT"] == endpoint
        assert float(child["AX3L_ZMQ_TIMEOUT"]) == 7
    if spawn == "exec":
        assert environments[0]["AX3L_CONVERSATION_PARAMETER"] == entry.name
    else:  # the zygote's environment has no binding; each child sets its own after the fork
        assert all("AX3L_CONVERSATION_PARAMETER" not in child for child in environments)
