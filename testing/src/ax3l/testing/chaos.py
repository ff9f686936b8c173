"""Chaos harness: the whole stack as supervised real processes, killed with SIGKILL and frozen
with SIGSTOP at random.

``PrivateMariaDB`` is a MariaDB of its own (``scripts/mariadb.sh`` with a throwaway run
directory and a free port), so the shared private MariaDB under ``.run`` is never touched.
``Supervisor`` restarts each service after it dies, the way systemd or compose would: after a
short random delay when the chaos driver killed it, with backoff when it died on its own (and
those deaths are recorded: they are findings); a frozen (stopped) process counts as alive, and
a SIGKILL ends it like any other. ``Freezer`` SIGSTOPs a service's processes and SIGCONTs them
after a while, and always resumes whatever it stopped (``resume_all``). ``Probe`` is the driver's
own short-timeout connection (what a submission looks like in the database, to time a freeze to
it). ``ProgressMonitor`` samples the number of completed steps so recovery times can be
measured. The history invariants the run is checked against are ``ax3l.testing.invariants``.
Test-only.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from ax3l.shared.waiting import WaitTimeout, wait_until
from ax3l.testing.plugin import TestDatabases, free_port, read_env_file

STEP_EVENTS = ("configuration_compared", "parameter_space_exhausted")


def _pid_state(pid: int) -> str | None:
    """The kernel's state letter of ``pid`` (``Z`` for a zombie), None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()[0]


def _start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), None when it is gone: with the pid it names
    one process, so a pid reused after a kill is never signalled by mistake."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rpartition(")")[2].split()[19])


def _descendants(root: int) -> list[int]:
    """Every live descendant of ``root``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int | None) -> bool:
    return pid is not None and _pid_state(pid) not in (None, "Z")


class PrivateMariaDB:
    """A MariaDB server of one test, started and restarted with ``scripts/mariadb.sh``."""

    def __init__(self, repo: Path, run_dir: Path | None = None, port: int | None = None):
        self.script = repo / "scripts" / "mariadb.sh"
        self._owned = run_dir is None
        # A short path: the server's Unix socket lives in it (sun_path is 108 bytes).
        self.run_dir = run_dir or Path(tempfile.mkdtemp(prefix="ax3l-chaos-db-"))
        self.port = port or free_port()
        self.pidfile = self.run_dir / "mariadb" / "mysqld.pid"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "AX3L_RUN_DIR": str(self.run_dir),
            "AX3L_DEV_DB_PORT": str(self.port),
        }

    def start(self, timeout: float = 120.0) -> None:
        """``mariadb.sh start``: returns once the server answers (raises when it did not)."""
        if self.pidfile.exists() and not _alive(self.pid()):
            # A SIGKILLed server may linger as a zombie until PID 1 reaps it; the script
            # would take it for a live server. A supervisor knows its child died.
            self.pidfile.unlink(missing_ok=True)
        done = subprocess.run(
            ["bash", str(self.script), "start"],
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            raise RuntimeError(f"mariadb.sh start failed ({done.returncode}): {done.stderr}")

    def pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        return _alive(self.pid())

    def pids(self) -> list[int]:
        """The server's process (what a freeze stops)."""
        pid = self.pid()
        return [pid] if _alive(pid) and pid is not None else []

    def kill9(self) -> None:
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(WaitTimeout):
                wait_until(lambda: not _alive(pid), 10)

    def settings(self) -> dict[str, str]:
        return read_env_file(self.run_dir / "db.env")

    def databases(self) -> TestDatabases:
        """The ``ax3l`` and ``snakelab`` databases the script creates, with their grants."""
        values = self.settings()
        return TestDatabases.from_env(
            values, values["AX3L_DB_NAME"], values["AX3L_SNAKELAB_DB_NAME"]
        )

    def destroy(self) -> None:
        """Stop the server and, when this object made the run directory, delete it."""
        if self.alive():
            subprocess.run(
                ["bash", str(self.script), "stop"],
                env=self._env(),
                capture_output=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )
        if self.alive():
            self.kill9()
        if self._owned:
            shutil.rmtree(self.run_dir, ignore_errors=True)


class ServiceProcess:
    """A service started in a session of its own, so SIGKILL reaches its children too (its
    MCP sessions), as a supervisor's control group would."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log_path: Path):
        self.name = name
        self.command = command
        self.env = env
        self.log_path = log_path
        self.popen: subprocess.Popen[bytes] | None = None
        self.log_offset = 0

    def spawn(self) -> None:
        self.reap()
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            log.write(f"\n===== chaos: start {time.strftime('%H:%M:%S')} =====\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                self.command,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    def pids(self) -> list[int]:
        """The process and its descendants (the orchestrator's MCP sessions), parent first: what
        a freeze stops, as a control group's freezer would."""
        if not self.alive():
            return []
        assert self.popen is not None
        return [self.popen.pid, *_descendants(self.popen.pid)]

    def kill9(self) -> None:
        """SIGKILL the process, its session and every descendant (the MCP SDK starts its
        children in sessions of their own), as a control-group kill would."""
        if self.popen is None:
            return
        descendants = _descendants(self.popen.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        for pid in descendants:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.reap()

    def reap(self) -> None:
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(10)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL of the whole session."""
        if self.alive():
            assert self.popen is not None
            self.popen.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        self.kill9()

    def output_since_start(self, lines: int = 8) -> str:
        """The last lines this incarnation wrote (why it died)."""
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as log:
            log.seek(self.log_offset)
            text = log.read().decode(errors="replace")
        return "\n".join([line for line in text.splitlines() if line.strip()][-lines:])


@dataclass
class Death:
    """A service ended without being killed by the chaos driver."""

    service: str
    at: float
    returncode: int | None
    tail: str


@dataclass
class Restart:
    service: str
    died_at: float
    restarted_at: float
    killed: bool
    ok: bool
    error: str = ""


@dataclass(eq=False)
class Supervised:
    """One service under supervision: its process (or the MariaDB) and its restart thread."""

    name: str
    spawn: Callable[[], None]
    alive: Callable[[], bool]
    _kill9: Callable[[], None]
    describe_death: Callable[[], tuple[int | None, str]]
    rng: random.Random
    kill_delay: tuple[float, float]
    pids: Callable[[], list[int]] = field(default=lambda: [])
    killed_pending: bool = field(default=False, init=False)
    restarting: bool = field(default=False, init=False)
    lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def kill9(self) -> None:
        with self.lock:
            self.killed_pending = True
            self._kill9()


class Supervisor:
    """Restarts dead services: after a random delay when the chaos driver killed them, else
    with backoff (0.5 s doubling to 8 s, reset after 30 s of uptime), like a restart policy.

    A stopped (SIGSTOPped) process is alive: no restart policy restarts a frozen service. When
    the driver SIGKILLs a frozen one it dies like a running one (SIGKILL needs no SIGCONT) and is
    restarted as killed; the new process is not frozen, and ``Freezer`` never signals it (it
    names processes by pid and start time)."""

    def __init__(self) -> None:
        self.services: dict[str, Supervised] = {}
        self.deaths: list[Death] = []
        self.restarts: list[Restart] = []
        self.restart_listeners: list[Callable[[Restart], None]] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def add(self, service: Supervised) -> None:
        self.services[service.name] = service

    def start(self) -> None:
        for service in self.services.values():
            thread = threading.Thread(
                target=self._watch, args=(service,), name=f"supervise-{service.name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def all_up(self) -> bool:
        return all(s.alive() and not s.restarting for s in self.services.values())

    def _watch(self, service: Supervised) -> None:
        backoff = 0.5
        up_since = time.monotonic()
        spawn_failed = False
        while not self._stop.is_set():
            if service.alive():
                if time.monotonic() - up_since > 30:
                    backoff = 0.5
                self._stop.wait(0.05)
                continue
            died_at = time.monotonic()
            service.restarting = True
            with service.lock:
                killed = service.killed_pending
                service.killed_pending = False
            if killed:
                delay = service.rng.uniform(*service.kill_delay)
            elif spawn_failed:
                delay = backoff
                backoff = min(backoff * 2, 8.0)
            else:
                code, tail = service.describe_death()
                with self._lock:
                    self.deaths.append(Death(service.name, died_at, code, tail))
                delay = backoff
                backoff = min(backoff * 2, 8.0)
            if self._stop.wait(delay):
                service.restarting = False
                return
            try:
                service.spawn()
                restart = Restart(service.name, died_at, time.monotonic(), killed, True)
                spawn_failed = False
            except Exception as exc:
                restart = Restart(
                    service.name, died_at, time.monotonic(), killed, False, str(exc)[-2000:]
                )
                spawn_failed = True
            with self._lock:
                self.restarts.append(restart)
            for listener in self.restart_listeners:
                listener(restart)
            up_since = time.monotonic()
            service.restarting = False


@dataclass(frozen=True)
class Stopped:
    """One SIGSTOPped process: its pid and start time (a reused pid is another process)."""

    pid: int
    start_time: int


class Freezer:
    """Freezes services with SIGSTOP and resumes them with SIGCONT ``seconds`` later.

    Every stopped process is remembered before it is stopped and forgotten only once resumed,
    so ``resume_all`` (called by the driver's ``finally``, by the context manager's exit and by
    the stack's teardown) leaves nothing stopped, whatever failed. A process killed while frozen
    is simply gone; a resume skips it. One freeze per victim at a time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped: dict[str, list[Stopped]] = {}
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()

    def __enter__(self) -> Freezer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.resume_all()

    def frozen(self) -> list[str]:
        with self._lock:
            return [name for name, stopped in self._stopped.items() if stopped]

    def is_frozen(self, name: str) -> bool:
        return name in self.frozen()

    def freeze(self, name: str, pids: list[int], seconds: float) -> int:
        """SIGSTOP ``pids`` (parent first) and SIGCONT them after ``seconds`` from a thread of
        its own; returns how many processes were stopped (0: nothing to freeze)."""
        if self._closing.is_set():
            return 0
        with self._lock:
            if self._stopped.get(name):
                raise RuntimeError(f"{name} is frozen already")
            stopped = self._stopped.setdefault(name, [])
            for pid in pids:
                start = _start_time(pid)
                if start is None:
                    continue
                stopped.append(Stopped(pid, start))  # remembered first: always resumed
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGSTOP)
            count = len(stopped)
        if count:
            thread = threading.Thread(
                target=self._thaw_after, args=(name, seconds), name=f"thaw-{name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return count

    def _thaw_after(self, name: str, seconds: float) -> None:
        try:
            self._closing.wait(seconds)
        finally:
            self.resume(name)

    def resume(self, name: str) -> None:
        """SIGCONT what ``name``'s freeze stopped (children first), unless it is gone."""
        with self._lock:
            stopped = self._stopped.pop(name, [])
            for process in reversed(stopped):
                if _start_time(process.pid) == process.start_time:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(process.pid, signal.SIGCONT)

    def wait_thawed(self, timeout: float) -> bool:
        """Whether every freeze ended by itself within ``timeout``."""
        try:
            wait_until(lambda: not self.frozen(), timeout, interval=0.05)
        except WaitTimeout:
            return False
        return True

    def resume_all(self) -> None:
        """Resume everything still stopped now, and end the freezes' threads."""
        self._closing.set()
        for name in list(self._stopped):
            self.resume(name)
        for thread in self._threads:
            thread.join(5)


class Probe:
    """The driver's own connection to the Ax3l database, with 1 s timeouts: a frozen or dead
    MariaDB costs a second and a None, never a hang. Reconnects after every error."""

    def __init__(self, databases: TestDatabases):
        self.databases = databases
        self._conn: Any = None

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def scalar(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        """The first column of the first row, or None (no row, or no answer)."""
        try:
            if self._conn is None:
                self._conn = pymysql.connect(
                    host=self.databases.host,
                    port=self.databases.port,
                    user=self.databases.admin_user,
                    password=self.databases.admin_password,
                    database=self.databases.ax3l_db,
                    autocommit=True,
                    connect_timeout=1,
                    read_timeout=1,
                    write_timeout=1,
                )
            with self._conn.cursor() as cur:
                cur.execute(sql, args)
                row = cur.fetchone()
                return None if row is None else row[0]
        except pymysql.err.MySQLError:
            self.close()
            return None

    def steps(self) -> int | None:
        """Completed steps (comparisons and exhausted turns)."""
        value = self.scalar("SELECT COUNT(*) FROM events WHERE name IN (%s, %s)", STEP_EVENTS)
        return None if value is None else int(value)

    def last_tool_request(self) -> int | None:
        """The newest ``tool_request_received`` event: the broker's first write for a proposal,
        just before its checks, its intent and ``simulation.submit``."""
        value = self.scalar(
            "SELECT COALESCE(MAX(event_id), 0) FROM events WHERE name = 'tool_request_received'"
        )
        return None if value is None else int(value)

    def last_intent(self) -> int | None:
        """The newest submission intent: the broker's last write before ``simulation.submit``
        (SnakeLab stores the run a few milliseconds later)."""
        value = self.scalar("SELECT COALESCE(MAX(intent_id), 0) FROM submission_intents")
        return None if value is None else int(value)

    def wait_for_submission(self, timeout: float, *, intent: bool) -> str:
        """Wait for the broker's next proposal: its ``tool_request_received`` (polled every 10
        ms, for up to ``timeout`` s) and, with ``intent``, then its submission intent (polled
        every millisecond for up to 3 s: the send follows at once). Returns what was seen
        last: ``tool request``, ``submission intent``, or what was not."""
        if not self.wait_for_new(self.last_tool_request, timeout):
            return f"no tool request within {timeout:g} s"
        if not intent:
            return "tool request"
        if not self.wait_for_new(self.last_intent, 3.0, interval=0.001):
            return "tool request, no intent within 3 s"
        return "submission intent"

    def wait_for_new(
        self, read: Callable[[], int | None], timeout: float, interval: float = 0.01
    ) -> bool:
        """Whether ``read`` grew within ``timeout`` (polled every ``interval`` s)."""
        deadline = time.monotonic() + timeout
        base = read()  # the base is read before the deadline's clock matters
        while time.monotonic() < deadline:
            time.sleep(interval)
            value = read()
            if base is None:
                base = value
            elif value is not None and value > base:
                return True
        return False


class ProgressMonitor:
    """Samples the number of completed steps (compared or exhausted) every ``interval`` s,
    reconnecting whenever the database went away."""

    def __init__(self, databases: TestDatabases, interval: float = 0.25):
        self.databases = databases
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._probe = Probe(databases)

    def start(self) -> ProgressMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._probe.close()

    def count(self) -> int | None:
        return self._probe.steps()

    def _run(self) -> None:
        while not self._stop.is_set():
            value = self.count()
            if value is not None:
                self.samples.append((time.monotonic(), value))
            self._stop.wait(self.interval)

    def latest(self) -> int:
        return self.samples[-1][1] if self.samples else 0

    def first_above(self, after: float, value: int) -> float | None:
        """When the count first exceeded ``value`` at or after time ``after``."""
        for at, count in self.samples:
            if at >= after and count > value:
                return at
        return None


def get_status(url: str, timeout: float = 0.5) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return dict(json.loads(response.read()))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@contextlib.contextmanager
def admin_connection(databases: TestDatabases) -> Iterator[Any]:
    conn = databases.connect("admin", databases.ax3l_db)
    try:
        yield conn
    finally:
        conn.close()


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
