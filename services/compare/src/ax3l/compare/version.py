"""The Ax3l version a machine runs, as its installed packages say.

A repeat runs the reference SnakeLab, the toolbroker and the orchestrator from the Python
environment of the machine it runs on (under ``--ray``, a node's). A comparison whose repeats
ran different code would compare the code, not the proposers, so every repeat first checks that
its machine runs the version ``ax3l-compare`` runs (``check``) and refuses to start otherwise.

The version is that of the installed Ax3l distributions a repeat runs (``PACKAGES``, from their
metadata): ``0.1.0`` when they agree, else each one's (``ax3l-compare 0.2.0, ax3l-shared
0.1.0, ...``). ``AX3L_VERSION`` is something else: the label stamped on every event, which a
repeat's services take from ``ax3l-compare``'s settings on whatever machine they run.
"""

from __future__ import annotations

import socket
from importlib import metadata

PACKAGES = (
    "ax3l-compare",
    "ax3l-shared",
    "ax3l-orchestrator",
    "ax3l-toolbroker",
    "ax3l-mcp-snakelab",
    "ax3l-snakelab-ref",
)


class VersionMismatch(RuntimeError):
    """A machine runs another Ax3l version than ``ax3l-compare``."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)


def _installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def ax3l_version() -> str:
    """The installed Ax3l packages' version (each one's when they differ)."""
    found = {name: _installed(name) for name in PACKAGES}
    if len(set(found.values())) == 1:
        return next(iter(found.values()))
    return ", ".join(f"{name} {version}" for name, version in found.items())


def check(expected: str, where: str | None = None) -> str:
    """This machine's version; ``VersionMismatch`` naming both when it is not ``expected``."""
    here = ax3l_version()
    if here != expected:
        machine = where or socket.gethostname()
        raise VersionMismatch(
            f"{machine} runs Ax3l {here}, but ax3l-compare runs Ax3l {expected}: install the"
            " same Ax3l version on every node (docs/scaling.md)"
        )
    return here
