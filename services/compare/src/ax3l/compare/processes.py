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
from typing import Protocol, TypeVar

from ax3l.shared.ports import free_port as free_port
from ax3l.shared.processes import ManagedProcess, ProcessFailed
from ax3l.shared.stack import spec

T = TypeVar("T")

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
        "AX3L_PROPOSER_SEED",
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
# A free port can be taken between its choice and the service's bind (another process of this
# machine draws from the same range: a Ray node's workers listen on 10002-19999 by default):
# the service is then started again on new ports, this many times in all.
PORT_ATTEMPTS = 3


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


def _ready(started: Service, service: spec.Service) -> Service:
    """``started`` once it answers its health check; stopped when it does not (or the wait
    is interrupted), so that no service outlives a failed start."""
    try:
        started.wait_ready(service.healthy, START_TIMEOUT)
    except BaseException:
        started.stop(STOP_TIMEOUT)
        raise
    return started


def port_taken(exc: BaseException) -> bool:
    """Whether a service failed because its port was taken."""
    return "address already in use" in str(exc).lower()


def on_free_ports(start: Callable[[], T], attempts: int = PORT_ATTEMPTS) -> T:
    """``start()`` (which draws its own free ports), again when its port was taken.

    A loop of its own on purpose: tenacity's ``Retrying`` with ``stop_after_attempt`` costs
    108 us a start that is retried once against this loop's 0.8 us (``bench/bench_retries.py``).
    """
    for attempt in range(1, attempts + 1):
        try:
            return start()
        except ProcessFailed as exc:
            if attempt == attempts or not port_taken(exc):
                raise
    raise AssertionError("unreachable")


def start_snakelab(
    env: dict[str, str],
    folder: Path,
    surrogate_seconds: float,
    schema: Path,
    port: int | None = None,
    launcher: Launcher = launch,
) -> tuple[Service, str]:
    """The reference SnakeLab on the surrogate trainer; returns it and its control endpoint
    (``port``: a given one, to restart a SnakeLab where it was; default a free one, another
    when it was taken before SnakeLab bound it)."""

    def start() -> tuple[Service, str]:
        service = spec.service(
            "snakelab", {"SNAKELAB_PORT": str(free_port() if port is None else port)}
        )
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
        started = _ready(launcher("snakelab", args, full, folder / "snakelab.log"), service)
        assert service.zmq_health is not None
        return started, service.zmq_health

    return on_free_ports(start) if port is None else start()


def start_toolbroker_on_free_ports(
    env: dict[str, str], folder: Path, launcher: Launcher = launch
) -> tuple[Service, str]:
    """The toolbroker on a free HTTP port and ZeroMQ endpoint (new ones when one was taken);
    returns it and its endpoint."""

    def start() -> tuple[Service, str]:
        endpoint = f"tcp://127.0.0.1:{free_port()}"
        overrides = {"AX3L_TOOLBROKER_PORT": str(free_port()), "AX3L_ZMQ_ENDPOINT": endpoint}
        service = spec.service("toolbroker", {**env, **overrides})
        full = service.environment(env, overrides)
        log = folder / "toolbroker.log"
        started = launcher("toolbroker", service.argv(sys.executable), full, log)
        return _ready(started, service), endpoint

    return on_free_ports(start)


def start_orchestrator(
    env: dict[str, str],
    folder: Path,
    proposer: str,
    launcher: Launcher = launch,
    *,
    promotion: str = "single",
    golden: str = "spec",
    seed: int | None = None,
) -> Service:
    """The orchestrator with ``AX3L_PROPOSER`` = ``proposer``, ``AX3L_PROMOTION`` =
    ``promotion``, ``AX3L_GOLDEN`` = ``golden`` and ``AX3L_PROPOSER_SEED`` = ``seed`` (the
    repeat's: its draws are the same
    in every comparison with that seed), once its status API answers (``/health``; it seeds
    meanwhile), started again on another port when its port was taken (a restart it recovers
    from, like any)."""

    def start() -> Service:
        overrides = {
            "AX3L_ORCHESTRATOR_PORT": str(free_port()),
            "AX3L_PROPOSER": proposer,
            "AX3L_PROMOTION": promotion,
            "AX3L_GOLDEN": golden,
        }
        if seed is not None:
            overrides["AX3L_PROPOSER_SEED"] = str(seed)
        service = spec.service("orchestrator", {**env, **overrides})
        full = service.environment({**FAST_LOOP, **env}, overrides)
        argv = service.argv(sys.executable)
        log = folder / "orchestrator.log"
        return _ready(launcher("orchestrator", argv, full, log), service)

    return on_free_ports(start)
