"""`make start`'s supervisor: crashed services come back, each process gets only its settings.

The stack runs against a MariaDB of its own (``scripts/mariadb.sh`` in a temporary run
directory on a free port), so the shared private MariaDB under ``.run`` is never touched.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from ax3l.shared.processes import process_alive
from ax3l.shared.stack.mariadb import PrivateMariaDB
from ax3l.shared.stack.spec import http_get
from ax3l.testing.plugin import free_port, read_env_file, wait_until

REPO = Path(__file__).resolve().parent.parent
STACK = [sys.executable, str(REPO / "scripts" / "stack.py")]
SERVICES = ("snakelab", "toolbroker", "orchestrator", "reports")


class RunDir:
    """A throwaway run directory with its own MariaDB."""

    def __init__(self) -> None:
        # Short: the MariaDB socket path must fit in a sockaddr_un.
        self.path = Path(tempfile.mkdtemp(prefix="ax3l-sv-", dir="/tmp"))
        self.server = PrivateMariaDB(REPO, self.path)
        self.db_port = self.server.port

    def stack_env(self, **extra: str) -> dict[str, str]:
        self.zmq_port = free_port()
        self.ports = {name: free_port() for name in ("reports", "orchestrator", "toolbroker")}
        self.snakelab_port = free_port()
        prefixes = ("AX3L_", "SNAKELAB_", "DB_")
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith(prefixes)},
            "AX3L_RUN_DIR": str(self.path),
            "SNAKELAB_PORT": str(self.snakelab_port),
            "SNAKELAB_EVENTS_PORT": "0",
            "SNAKELAB_TRAINER": "surrogate",
            "SNAKELAB_SURROGATE_SECONDS": "1",
            "AX3L_ZMQ_ENDPOINT": f"tcp://127.0.0.1:{self.zmq_port}",
            "AX3L_REPORTS_PORT": str(self.ports["reports"]),
            "AX3L_ORCHESTRATOR_PORT": str(self.ports["orchestrator"]),
            "AX3L_TOOLBROKER_PORT": str(self.ports["toolbroker"]),
            "AX3L_POLL_INTERVAL": "0.2",
            "AX3L_PROPOSER": "random",
            "AX3L_STACK_BACKOFF_MAX": "1",
            **extra,
        }

    def pid(self, service: str) -> int | None:
        try:
            return int((self.path / "stack" / f"{service}.pid").read_text())
        except (OSError, ValueError):
            return None

    def log(self, name: str) -> str:
        return (self.path / "logs" / f"{name}.log").read_text()


@pytest.fixture(scope="module")
def run_dir() -> Iterator[RunDir]:
    folder = RunDir()
    folder.server.start(180)
    try:
        yield folder
    finally:
        folder.server.stop(180)
        shutil.rmtree(folder.path, ignore_errors=True)


def _stack(action: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*STACK, action], env=env, capture_output=True, text=True, timeout=timeout
    )


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {key.decode(): value.decode() for key, _, value in pairs}


_alive = process_alive


def _processes_with(text: str) -> list[int]:
    """Live processes whose environment or command line contains ``text``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            blob = (proc / "environ").read_bytes() + (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in blob and _alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def _healthy(port: int) -> bool:
    return http_get(f"http://127.0.0.1:{port}/health", timeout=1)[0] == 200


def _stopped_cleanly(folder: RunDir, env: dict[str, str], pids: set[int]) -> None:
    stopped = _stack("stop", env)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not list((folder.path / "stack").glob("*.pid"))
    assert [pid for pid in pids if _alive(pid)] == []
    # Nothing of this stack is left: no service, no MCP child (they all know the tool socket).
    assert _processes_with(f"127.0.0.1:{folder.zmq_port}") == []
    assert _processes_with(f"--port\0{folder.snakelab_port}") == []


def _assert_least_privilege(run_dir: RunDir, environments: dict[str, dict[str, str]]) -> None:
    """No process sees the admin login; reports get only their SELECT-only login."""
    db_env = read_env_file(run_dir.path / "db.env")
    for name, environment in environments.items():
        assert "AX3L_DB_ADMIN_USER" not in environment, name
        assert "AX3L_DB_ADMIN_PASSWORD" not in environment, name
        assert db_env["AX3L_DB_ADMIN_PASSWORD"] not in environment.values(), name
        assert "exported-admin-secret" not in environment.values(), name
        assert "AX3L_RUN_DIR" not in environment, name
    reports = environments["reports"]
    assert "DB_USER" not in reports and "DB_PASSWORD" not in reports
    assert reports["AX3L_REPORTS_DB_USER"] == db_env["AX3L_REPORTS_DB_USER"]
    for name in ("snakelab", "toolbroker", "orchestrator"):
        assert "AX3L_REPORTS_DB_PASSWORD" not in environments[name], name
    assert not any(key.startswith("SNAKELAB_DB") for key in environments["orchestrator"])
    assert "DB_PASSWORD" not in environments["snakelab"]
    assert environments["orchestrator"]["AX3L_PROPOSER"] == "random"
    # The report server's login, as the stack hands it out, cannot write.
    conn = pymysql.connect(
        host="127.0.0.1",
        port=run_dir.db_port,
        user=reports["AX3L_REPORTS_DB_USER"],
        password=reports["AX3L_REPORTS_DB_PASSWORD"],
        database="ax3l",
        autocommit=True,
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM events")
            for statement in (
                "INSERT INTO events (name) VALUES ('x')",
                "UPDATE events SET name = 'x'",
                "DELETE FROM events",
            ):
                with pytest.raises(pymysql.err.MySQLError) as refused:
                    cur.execute(statement)
                assert refused.value.args[0] == 1142, statement
    finally:
        conn.close()


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_supervised_stack_restarts_killed_services_with_least_privilege(run_dir):
    """Each process gets only its settings; kill -9 of the orchestrator and the broker: both
    come back, the restarts are logged and `status` shows them; stop leaves nothing behind."""
    env = run_dir.stack_env(AX3L_DB_ADMIN_PASSWORD="exported-admin-secret")
    seen: set[int] = set()
    try:
        started = _stack("start", env)
        assert started.returncode == 0, started.stdout + started.stderr
        supervisor = int((run_dir.path / "stack" / "supervisor.pid").read_text())
        seen.add(supervisor)
        before = {name: run_dir.pid(name) for name in SERVICES}
        assert all(before.values()), before
        seen.update(pid for pid in before.values() if pid)
        _assert_least_privilege(
            run_dir, {name: _environ(pid) for name, pid in before.items() if pid}
        )

        for name in ("orchestrator", "toolbroker"):
            os.kill(before[name], signal.SIGKILL)
        for name in ("orchestrator", "toolbroker"):
            port = run_dir.ports[name]
            after = wait_until(
                lambda name=name: (
                    (pid := run_dir.pid(name)) not in (None, before[name]) and _alive(pid) and pid
                ),
                timeout=30,
                interval=0.1,
                what=f"{name} restarted",
            )
            seen.add(after)
            wait_until(lambda port=port: _healthy(port), timeout=30, what=f"{name} healthy")
            assert f"{name} was killed by SIGKILL" in run_dir.log("stack")
            assert f"{name} restarted (pid {after}, restart 1)" in run_dir.log("stack")
            assert f"stack: {name} restarted (pid {after}" in run_dir.log(name)

        status = _stack("status", env, timeout=30)
        assert status.returncode == 0, status.stdout + status.stderr
        lines = {line.split()[0]: line for line in status.stdout.splitlines()[:5]}
        phase = status.stdout.splitlines()[5]
        assert f"pid {supervisor}" in lines["supervisor"]
        for name in SERVICES:
            assert " running " in lines[name] and f"pid {run_dir.pid(name)} " in lines[name]
            assert "health ok" in lines[name], lines[name]
        assert "restarts 1 " in lines["orchestrator"] and "restarts 1 " in lines["toolbroker"]
        assert "restarts 0 " in lines["snakelab"]
        assert "was killed by SIGKILL" in lines["orchestrator"]
        assert phase.startswith("orchestrator phase: ") and "unknown" not in phase
    finally:
        _stopped_cleanly(run_dir, env, seen)


def test_start_waits_for_the_database_and_gives_up_on_a_crash_loop(run_dir):
    """start rides out a MariaDB coming back, then gives up on a service that dies at once."""
    env = run_dir.stack_env(AX3L_STACK_RESTART_LIMIT="2", AX3L_STACK_BACKOFF_MAX="0.5")
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", run_dir.snakelab_port))  # SnakeLab cannot bind its socket
    blocker.listen()
    run_dir.server.stop(180)
    comeback = threading.Timer(2.0, run_dir.server.start, args=(180,))
    comeback.start()
    try:
        began = time.monotonic()
        started = _stack("start", env, timeout=180)
        output = started.stdout + started.stderr
        assert started.returncode == 1, output
        assert "waiting up to 120 s for the database" in output
        assert "snakelab crashed 2 times in a row" in output and "giving up" in output
        assert str(run_dir.path / "logs" / "snakelab.log") in output
        assert time.monotonic() - began < 60
        assert "giving up" in run_dir.log("snakelab")
    finally:
        comeback.join()
        blocker.close()
        _stopped_cleanly(run_dir, env, set())
