"""Run the whole Ax3l stack as local processes: ``make run`` (foreground) and ``make start/stop``.

The private MariaDB is started by ``scripts/mariadb.sh`` (the Makefile does it first); this
script creates the schema and starts, in order, the reference SnakeLab, the toolbroker, the
orchestrator and the report server. ``SERVICES`` is the one definition of each process's
command and environment; ``tests/test_compose.py`` checks compose.yaml against it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("AX3L_RUN_DIR", REPO / ".run"))
PID_DIR = RUN_DIR / "stack"
LOG_DIR = RUN_DIR / "logs"


@dataclass(frozen=True)
class Service:
    """One long-running process of the stack."""

    name: str
    command: list[str]
    # Environment variables the service reads (documented in README's settings table).
    env_keys: tuple[str, ...]
    health_url: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)


DB_KEYS = ("DB_HOST", "DB_PORT", "DB_USER", "DB_PASSWORD", "AX3L_DB_NAME", "AX3L_SNAKELAB_DB_NAME")


def services(env: dict[str, str]) -> list[Service]:
    """The stack's processes, in start order, for the given environment."""
    host = env.get("AX3L_HTTP_HOST", "127.0.0.1")
    return [
        Service(
            "snakelab",
            [
                "snakelab-server",
                "--address",
                "127.0.0.1",
                "--port",
                env.get("SNAKELAB_PORT", "41970"),
            ],
            (
                "SNAKELAB_DB_HOST",
                "SNAKELAB_DB_PORT",
                "SNAKELAB_DB_USER",
                "SNAKELAB_DB_PASSWORD",
                "SNAKELAB_DB_NAME",
                "SNAKELAB_TRAINER",
                "SNAKELAB_SURROGATE_SECONDS",
            ),
        ),
        Service(
            "toolbroker",
            ["ax3l-toolbroker"],
            (
                *DB_KEYS,
                "AX3L_ZMQ_ENDPOINT",
                "AX3L_SNAKELAB_ENDPOINT",
                "AX3L_TOOLBROKER_PORT",
                "AX3L_HTTP_HOST",
            ),
            f"http://{host}:{env.get('AX3L_TOOLBROKER_PORT', '28872')}/health",
        ),
        Service(
            "orchestrator",
            ["ax3l-orchestrator"],
            (
                *DB_KEYS,
                "AX3L_ZMQ_ENDPOINT",
                "AX3L_SNAKELAB_ENDPOINT",
                "AX3L_LLM_URL",
                "AX3L_PROPOSER",
                "AX3L_ORCHESTRATOR_PORT",
                "AX3L_HTTP_HOST",
            ),
            f"http://{host}:{env.get('AX3L_ORCHESTRATOR_PORT', '28871')}/health",
        ),
        Service(
            "reports",
            ["ax3l-reports"],
            (*DB_KEYS, "AX3L_SNAKELAB_ENDPOINT", "AX3L_REPORTS_PORT", "AX3L_HTTP_HOST"),
            f"http://{host}:{env.get('AX3L_REPORTS_PORT', '28870')}/health",
        ),
    ]


def read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def stack_env() -> dict[str, str]:
    """The environment every process gets: the shell's, over the private MariaDB's settings."""
    db_env = RUN_DIR / "db.env"
    if not db_env.exists():
        sys.exit("stack: no .run/db.env; run `scripts/mariadb.sh start` (make does it for you)")
    env = read_env_file(db_env)
    env.setdefault("SNAKELAB_TRAINER", "drqn")
    env.update(os.environ)  # the user's settings win over the defaults above
    env.setdefault("SNAKELAB_PORT", "41970")
    env.setdefault("AX3L_SNAKELAB_ENDPOINT", f"tcp://127.0.0.1:{env['SNAKELAB_PORT']}")
    return env


def venv_bin(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def create_schema(env: dict[str, str]) -> None:
    subprocess.run([venv_bin("ax3l-db"), "create"], env=env, check=True)


def wait_healthy(service: Service, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    if service.health_url is None:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(
                f"stack: {service.name} exited with {proc.returncode}; see {log_path(service)}"
            )
        try:
            with urllib.request.urlopen(service.health_url, timeout=1) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"stack: {service.name} not healthy after {timeout:g} s; see {log_path(service)}")


def log_path(service: Service) -> Path:
    return LOG_DIR / f"{service.name}.log"


def pid_path(service: Service) -> Path:
    return PID_DIR / f"{service.name}.pid"


def running_pid(service: Service) -> int | None:
    path = pid_path(service)
    if not path.exists():
        return None
    try:
        pid = int(path.read_text())
        os.kill(pid, 0)
        return pid
    except (ValueError, ProcessLookupError, PermissionError):
        path.unlink(missing_ok=True)
        return None


def launch(service: Service, env: dict[str, str]) -> subprocess.Popen[bytes]:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    PID_DIR.mkdir(parents=True, exist_ok=True)
    log = open(log_path(service), "ab")
    command = [venv_bin(service.command[0]), *service.command[1:]]
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        cwd=REPO,
    )
    pid_path(service).write_text(str(proc.pid))
    return proc


def urls(env: dict[str, str]) -> str:
    host = env.get("AX3L_HTTP_HOST", "127.0.0.1")
    reports = f"http://{host}:{env.get('AX3L_REPORTS_PORT', '28870')}"
    orchestrator = f"http://{host}:{env.get('AX3L_ORCHESTRATOR_PORT', '28871')}"
    toolbroker = f"http://{host}:{env.get('AX3L_TOOLBROKER_PORT', '28872')}"
    return "\n".join(
        [
            f"  reports:      {reports}/",
            f"  highscores:   {reports}/experiment-highscores",
            f"  orchestrator: {orchestrator}/api/status",
            f"  toolbroker:   {toolbroker}/api/status",
            f"  logs:         {LOG_DIR}/",
        ]
    )


def start(foreground: bool) -> int:
    env = stack_env()
    create_schema(env)
    if env.get("AX3L_LLM_URL"):
        print(f"stack: proposer llm at {env['AX3L_LLM_URL']}")
    else:
        print("stack: no AX3L_LLM_URL set: the orchestrator uses the built-in tpe proposer")
    print(f"stack: SnakeLab trainer {env['SNAKELAB_TRAINER']}")
    procs: list[tuple[Service, subprocess.Popen[bytes]]] = []
    for service in services(env):
        if not foreground and running_pid(service):
            print(f"stack: {service.name} already running")
            continue
        proc = launch(service, env)
        procs.append((service, proc))
        wait_healthy(service, proc)
        print(f"stack: {service.name} started (pid {proc.pid})")
    print("Ax3l is running:\n" + urls(env))
    if not foreground:
        return 0
    print("Ctrl-C stops everything.")
    stopping = False

    def _stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    try:
        while not stopping:
            for service, proc in procs:
                if proc.poll() is not None:
                    print(f"stack: {service.name} exited with {proc.returncode}; stopping")
                    stopping = True
            time.sleep(0.5)
    finally:
        for service, _ in reversed(procs):
            terminate(service)
    return 0


def terminate(service: Service, timeout: float = 15) -> None:
    pid = running_pid(service)
    if pid is None:
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pid_path(service).unlink(missing_ok=True)
    print(f"stack: {service.name} stopped")


def stop() -> int:
    env = stack_env() if (RUN_DIR / "db.env").exists() else dict(os.environ)
    for service in reversed(services(env)):
        terminate(service)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("action", choices=["run", "start", "stop"])
    args = parser.parse_args(argv)
    if args.action == "stop":
        return stop()
    return start(foreground=args.action == "run")


if __name__ == "__main__":
    sys.exit(main())
