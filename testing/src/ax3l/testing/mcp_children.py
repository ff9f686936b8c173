"""The live MCP children of a process, read from /proc, and the entry each is bound to.

An exec'd child (``AX3L_MCP_SPAWN=exec``) is the process's own, with its binding in its
environment. A forked one (``fork``) is a child of the process's zygote and is named after
its binding; the zygote itself is not a session and is left out.
"""

from __future__ import annotations

from pathlib import Path

MCP_MODULE = b"ax3l.app.snakelab.tools"
ZYGOTE_MODULE = b"ax3l.app.snakelab.tools.zygote"


def _processes() -> dict[int, tuple[int, str, list[bytes], bytes]]:
    """pid -> (parent, name, command line, environment) of every live MCP process."""
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
            table[int(proc.name)] = (int(fields[1]), name, cmdline, raw)
    return table


def _zygotes(table: dict[int, tuple[int, str, list[bytes], bytes]], parent: int) -> set[int]:
    return {
        pid
        for pid, (ppid, _, cmdline, _) in table.items()
        if ppid == parent and ZYGOTE_MODULE in cmdline
    }


def zygotes_of(parent: int) -> set[int]:
    """The pids of ``parent``'s live zygotes."""
    return _zygotes(_processes(), parent)


def mcp_children(parent: int) -> dict[int, str]:
    """``parent``'s live MCP sessions: pid -> the entry they are bound to ("" if unbound)."""
    table = _processes()
    zygotes = _zygotes(table, parent)
    found = {}
    for pid, (ppid, name, _, raw) in table.items():
        if ppid in zygotes:
            found[pid] = name
        elif ppid == parent and pid not in zygotes:
            pairs = dict(item.partition(b"=")[::2] for item in raw.split(b"\0") if item)
            found[pid] = pairs.get(b"AX3L_CONVERSATION_PARAMETER", b"").decode()
    return found
