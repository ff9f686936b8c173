"""One repeat's services as real processes: the reference SnakeLab (surrogate trainer), the
toolbroker and the orchestrator, on free ports of 127.0.0.1.

The services, their commands, allow-lists and health checks are ``ax3l.shared.stack.spec``'s (what
``make run`` starts). Each process gets only what it reads: what any Python process needs, the Ax3l
settings the user exported (model server, token cap, constrained proposals...), and the repeat's
own database login, endpoints and schema file. The admin login reaches none of them; SnakeLab's
login only SnakeLab, Ax3l's only the broker and orchestrator.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from ax3l.shared.ports import free_port as free_port
from ax3l.shared.processes import ManagedProcess
from ax3l.shared.stack import spec

# Set per repeat, never taken from the user's environment.
PER_REPEAT = frozenset(
    {
        "DB_HOST",
        "DB_PORT",
        "DB_USER",
        "DB_PASSWORD",
        "AX3L_DB_NAME",
        "DB_NAME",
        "AX3L_SNAKELAB_DB_NAME",
        "AX3L_SNAKELAB_ENDPOINT",
        "AX3L_ZMQ_ENDPOINT",
        "AX3L_HTTP_HOST",
        "AX3L_ORCHESTRATOR_PORT",
        "AX3L_TOOLBROKER_PORT",
        "AX3L_REPORTS_PORT",
        "AX3L_SCHEMA_PATH",
        "AX3L_PROPOSER",
        "AX3L_PROMOTION",  # the arm's policy (arms.py), never the exported one
        "AX3L_CONVERSATION_PARAMETER",
        "AX3L_OUTPUT_DIR",
        "AX3L_RAW_LOGS_ENABLED",
    }
)
# Loop timings for 0 s runs: the defaults (5 s polls) would make the loop, not the proposer,
# the cost of a repeat. Exported values win.
FAST_LOOP = {"AX3L_POLL_INTERVAL": "0.05", "AX3L_RETRY_BACKOFF_MAX": "1"}
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0  # SIGTERM, then SIGKILL of the group


base_env = spec.process_env


def ax3l_passthrough(environ: Mapping[str, str]) -> dict[str, str]:
    """The Ax3l settings the user exported that a repeat's services should honour too."""
    known = set(spec.service("orchestrator", environ).env_keys) - PER_REPEAT
    return {k: v for k, v in environ.items() if k in known}


def launch(name: str, args: list[str], env: dict[str, str], log_path: Path) -> ManagedProcess:
    """A repeat's service in a process group of its own (stopping it stops the orchestrator's
    MCP children too); a failure shows the last 30 lines of its log."""
    return ManagedProcess(name, args, env, log_path, new_session=True, log_lines=30)


class Service(Protocol):
    """What a repeat does with a service it started (``ManagedProcess``, ``preload.Forked``)."""

    @property
    def pid(self) -> int: ...
    def wait_ready(self, ready: Callable[[], object], timeout: float = ...) -> None: ...
    def alive(self) -> bool: ...
    def exited(self) -> str | None: ...
    def failure(self, what: str) -> Exception: ...
    def log_tail(self, lines: int | None = None) -> str: ...
    def stop(self, timeout: float = ...) -> object: ...


# How a service is started: ``launch`` (a fresh ``python -m``) or ``preload.Preloader.launch``
# (forked from a pre-imported parent).
Launcher = Callable[[str, list[str], dict[str, str], Path], Service]


def start_snakelab(
    env: dict[str, str],
    folder: Path,
    surrogate_seconds: float,
    schema: Path,
    port: int | None = None,
    launcher: Launcher = launch,
) -> tuple[Service, str]:
    """The reference SnakeLab on the surrogate trainer; returns it and its control endpoint
    (``port``: a given one, to restart a SnakeLab where it was; default a free one)."""
    port = port or free_port()
    service = spec.service("snakelab", {"SNAKELAB_PORT": str(port)})
    full = service.environment(
        env,
        {
            "SNAKELAB_TRAINER": "surrogate",
            "SNAKELAB_SURROGATE_SECONDS": f"{surrogate_seconds:g}",
            "SNAKELAB_SCHEMA_PATH": str(schema),
            "SNAKELAB_LOG_LEVEL": "WARNING",
            "SNAKELAB_DB_WAIT_SECONDS": "10",
        },
    )
    args = [*service.argv(sys.executable), "--events-port", "0"]
    started = launcher("snakelab", args, full, folder / "snakelab.log")
    started.wait_ready(service.healthy, START_TIMEOUT)
    assert service.zmq_health is not None
    return started, service.zmq_health


def start_toolbroker(
    env: dict[str, str], folder: Path, zmq_endpoint: str, launcher: Launcher = launch
) -> Service:
    overrides = {"AX3L_TOOLBROKER_PORT": str(free_port()), "AX3L_ZMQ_ENDPOINT": zmq_endpoint}
    service = spec.service("toolbroker", {**env, **overrides})
    full = service.environment(env, overrides)
    started = launcher("toolbroker", service.argv(sys.executable), full, folder / "toolbroker.log")
    started.wait_ready(service.healthy, START_TIMEOUT)
    return started


def start_orchestrator(
    env: dict[str, str],
    folder: Path,
    proposer: str,
    launcher: Launcher = launch,
    *,
    promotion: str = "single",
) -> Service:
    """The orchestrator with ``AX3L_PROPOSER`` = ``proposer`` and ``AX3L_PROMOTION`` =
    ``promotion`` (not waited for: it seeds)."""
    overrides = {
        "AX3L_ORCHESTRATOR_PORT": str(free_port()),
        "AX3L_PROPOSER": proposer,
        "AX3L_PROMOTION": promotion,
    }
    service = spec.service("orchestrator", env)
    full = service.environment({**FAST_LOOP, **env}, overrides)
    return launcher("orchestrator", service.argv(sys.executable), full, folder / "orchestrator.log")
