"""The live MCP children of a process, read from /proc, and the entry each is bound to.

An exec'd child (``AX3L_MCP_SPAWN=exec``) is the process's own, with its binding in its
environment. A forked one (``fork``) is a child of the process's zygote and is named after
its binding; the zygote itself is not a session and is left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

MCP_MODULE = b"ax3l.app.snakelab.tools"
ZYGOTE_MODULE = b"ax3l.app.snakelab.tools.zygote"


class McpProcess(NamedTuple):
    parent: int
    name: str
    cmdline: list[bytes]
    environ: dict[str, str]  # as it was exec'd (a forked child shows its zygote's)


def mcp_processes() -> dict[int, McpProcess]:
    """pid -> parent, name, command line and environment of every live MCP process."""
    table = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            raw = (proc / "environ").read_bytes()
        except OSError:
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        fields = rest.split()
        if fields[0] != "Z" and any(part.startswith(MCP_MODULE) for part in cmdline):
            pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
            environ = {key.decode(): value.decode() for key, _, value in pairs}
            table[int(proc.name)] = McpProcess(int(fields[1]), name, cmdline, environ)
    return table


def _zygotes(table: dict[int, McpProcess], parent: int) -> set[int]:
    return {
        pid
        for pid, proc in table.items()
        if proc.parent == parent and ZYGOTE_MODULE in proc.cmdline
    }


def zygotes_of(parent: int, endpoint: str | None = None) -> set[int]:
    """The pids of ``parent``'s live zygotes (for children of the broker at ``endpoint``)."""
    table = mcp_processes()
    return {
        pid
        for pid in _zygotes(table, parent)
        if endpoint is None or table[pid].environ.get("AX3L_ZMQ_ENDPOINT") == endpoint
    }


def mcp_children(parent: int) -> dict[int, str]:
    """``parent``'s live MCP sessions: pid -> the entry they are bound to ("" if unbound)."""
    table = mcp_processes()
    zygotes = _zygotes(table, parent)
    found = {}
    for pid, proc in table.items():
        if proc.parent in zygotes:
            found[pid] = proc.name
        elif proc.parent == parent and pid not in zygotes:
            found[pid] = proc.environ.get("AX3L_CONVERSATION_PARAMETER", "")
    return found
