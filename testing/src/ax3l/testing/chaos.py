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
measured. ``check_invariants`` reads the databases
alone and returns every invariant with how often it was checked and each violation, instead of
stopping at the first failed assertion. Test-only.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
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
from collections import Counter
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


# -- invariants, from the databases alone ---------------------------------------------------


@dataclass
class Invariant:
    """One invariant: how many cases were checked and what violated it."""

    name: str
    checked: int = 0
    violations: list[str] = field(default_factory=list)

    def check(self, ok: bool, problem: str) -> None:
        self.checked += 1
        if not ok:
            self.violations.append(problem)

    @property
    def passed(self) -> bool:
        return not self.violations


@dataclass
class Ev:
    event_id: int
    name: str
    process_id: str | None
    parent: int | None
    content: Any

    def get(self, key: str, default: Any = None) -> Any:
        return self.content.get(key, default) if isinstance(self.content, dict) else default


def read_events(conn: Any) -> list[Ev]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT e.event_id, e.name, e.process_id, e.parent_event_id, m.content FROM events e"
            " LEFT JOIN event_messages m ON m.event_id = e.event_id ORDER BY e.event_id"
        )
        rows = cur.fetchall()
    found = []
    for event_id, name, process_id, parent, content in rows:
        if content is not None:
            with contextlib.suppress(ValueError):
                content = json.loads(content)
        found.append(Ev(int(event_id), name, process_id, parent, content))
    return found


CONFIG_SKIP = ("run_id",)


def read_runs(conn: Any, snakelab_db: str) -> list[dict[str, Any]]:
    """SnakeLab's runs in submission order, with their configuration tuple and episode count."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{snakelab_db}`.configurations")
        columns = [d[0] for d in cur.description]
        configs = {}
        for row in cur.fetchall():
            record = dict(zip(columns, row, strict=True))
            configs[record["run_id"]] = tuple(
                (c, float(record[c])) for c in columns if c not in CONFIG_SKIP
            )
        cur.execute(
            f"SELECT run_id, COUNT(*) FROM `{snakelab_db}`.simulation_episodes GROUP BY run_id"
        )
        episodes = {run_id: int(n) for run_id, n in cur.fetchall()}
        cur.execute(
            "SELECT id, run_id, status, high_score, started_at, error_message"
            f" FROM `{snakelab_db}`.simulation_runs ORDER BY id"
        )
        runs = []
        for sid, run_id, status, high_score, started_at, error in cur.fetchall():
            runs.append(
                {
                    "id": int(sid),
                    "run_id": run_id,
                    "status": status,
                    "high_score": high_score,
                    "started": started_at is not None,
                    "episodes": episodes.get(run_id, 0),
                    "error": error,
                    "config": configs.get(run_id),
                }
            )
        return runs


def never_started(run: dict[str, Any]) -> bool:
    """A failed run that never trained (the one kind a retry may resubmit, issue 11 item 6)."""
    return run["status"] == "failed" and (not run["started"] or run["episodes"] == 0)


def _run_of(event: Ev) -> Any:
    return event.get("run_id") or event.process_id


def _proposal_runs(events: list[Ev]) -> dict[int, list[str]]:
    """Each accepted proposal's runs, by its event id: its own, then its retries' (the
    orchestrator's ``simulation_submitted`` children of the proposal with reason ``retry``)."""
    runs = {e.event_id: [_run_of(e)] for e in events if e.name == "proposal_accepted"}
    for event in events:
        if (
            event.name == "simulation_submitted"
            and event.parent in runs
            and (event.get("reason") == "retry" or event.get("purpose") == "retry")
        ):
            runs[event.parent].append(_run_of(event))
    return runs


def _turn_story(events: list[Ev], checkpoint_id: Any) -> str:
    """What a turn stored, from the checkpoint ``checkpoint_id`` until the step completed:
    the checkpoints of its index (a failed attempt checkpoints it again), the proposals naming
    them or written under them, the comparisons and exhausted turns, in order."""
    if not isinstance(checkpoint_id, int):
        return "no checkpoint named"
    told: list[str] = []
    index: Any = None
    turn: set[int] = set()  # the turn's checkpoints so far
    current: int | None = None
    for event in events:
        if event.event_id < checkpoint_id:
            if event.name == "round_robin_checkpoint":
                current = event.event_id
            continue
        if event.name == "round_robin_checkpoint":
            if event.event_id == checkpoint_id:
                index = event.get("index")
            elif event.get("index") != index:
                break  # the turn moved on
            current = event.event_id
            turn.add(current)
            told.append(f"#{event.event_id} checkpoint index {event.get('index')}")
            continue
        named = event.get("checkpoint_event_id")
        if event.name == "proposal_accepted" and (named in turn or current in turn):
            told.append(
                f"#{event.event_id} proposal_accepted run {str(_run_of(event))[:8]}"
                + (" adopted" if event.get("adopted") else "")
                + (f" for checkpoint #{named}" if isinstance(named, int) else "")
                + ("" if named == current else f" (written under checkpoint #{current})")
            )
        elif event.name == "configuration_compared" and current in turn:
            told.append(
                f"#{event.event_id} configuration_compared run"
                f" {str(_run_of_compared(event))[:8]} {event.get('decision')}"
            )
            break
        elif event.name == "parameter_space_exhausted" and current in turn:
            told.append(f"#{event.event_id} parameter_space_exhausted")
            break
    return "; ".join(told) or f"checkpoint #{checkpoint_id} not found"


def _run_of_compared(event: Ev) -> Any:
    return event.get("latest_run_id") or event.process_id


def check_completed_runs_compared_once(events: list[Ev], runs: list[dict[str, Any]]) -> Invariant:
    """Every accepted proposal whose run completed in SnakeLab is compared exactly once: one
    ``configuration_compared`` naming that run as ``latest_run_id``. The newest accepted
    proposal may still be pending (no comparison yet); a comparison twice is never allowed. A
    retried proposal's runs are its own and its retries'; each of them that completed counts.
    """
    invariant = Invariant(
        "every accepted proposal whose SnakeLab run completed compared exactly once"
        " (the newest may be pending)"
    )
    by_run_id = {run["run_id"]: run for run in runs}
    comparisons: dict[Any, list[int]] = {}
    for event in events:
        if event.name == "configuration_compared":
            comparisons.setdefault(_run_of_compared(event), []).append(event.event_id)
    proposals = {e.event_id: e for e in events if e.name == "proposal_accepted"}
    newest = max(proposals, default=None)
    for proposal_id, run_ids in _proposal_runs(events).items():
        proposal = proposals[proposal_id]
        for run_id in run_ids:
            run = by_run_id.get(run_id)
            if run is None or run["status"] != "completed":
                continue
            made = comparisons.get(run_id, [])
            pending = not made and proposal_id == newest
            invariant.check(
                len(made) == 1 or pending,
                (
                    f"run {run_id} (SnakeLab id {run['id']}, completed, high score"
                    f" {run['high_score']}) of proposal_accepted #{proposal_id}"
                    f" ({proposal.get('parameter')}"
                    + (", adopted" if proposal.get("adopted") else "")
                    + f", checkpoint #{proposal.get('checkpoint_event_id')})"
                    f" compared {len(made)}x"
                    + (f" (#{', #'.join(str(m) for m in made)})" if made else "")
                    + f"; that turn: {_turn_story(events, proposal.get('checkpoint_event_id'))}"
                ),
            )
    return invariant


BASELINE_PURPOSES = ("seeding", "seed_rotation")


def run_roles(events: list[Ev]) -> dict[Any, str]:
    """What Ax3l recorded each run as: ``proposal`` (a ``proposal_accepted`` names it, the
    broker's record), ``baseline`` (a seeding or seed-rotation ``simulation_submitted``) or
    ``retry`` (the orchestrator's ``simulation_submitted`` retrying a proposal's step)."""
    proposals = {e.event_id for e in events if e.name == "proposal_accepted"}
    roles: dict[Any, str] = {}
    for event in events:
        if event.name == "proposal_accepted":
            roles.setdefault(_run_of(event), "proposal")
        elif event.name == "simulation_submitted":
            retry = event.get("reason") == "retry" or event.get("purpose") == "retry"
            of_proposal = event.parent in proposals or event.get("proposal_event_id") in proposals
            if event.get("purpose") in BASELINE_PURPOSES:
                roles.setdefault(_run_of(event), "baseline")
            elif retry and of_proposal:
                roles.setdefault(_run_of(event), "retry")
    return roles


def check_every_run_has_a_role(
    events: list[Ev], runs: list[dict[str, Any]], intents: list[dict[str, Any]] | None = None
) -> Invariant:
    """No SnakeLab run, whatever its status, is left unaccounted for: each is a proposal's run,
    a seeding or seed-rotation baseline or a retry of a proposal's step, as Ax3l recorded it
    (``run_roles``). A violation names the events that do mention the run, and the submission
    intents whose configuration it has (``intents``: rows with a flattened ``columns`` dict)."""
    invariant = Invariant(
        "every SnakeLab run is a proposal's, a baseline's or a retry's (no run unaccounted for)"
    )
    roles = run_roles(events)
    for run in runs:
        run_id = run["run_id"]
        if run_id in roles:
            invariant.check(True, "")
            continue
        naming = [
            f"{e.name} #{e.event_id}"
            + (f" (purpose {e.get('purpose')})" if e.get("purpose") else "")
            + (f" parent #{e.parent}" if e.parent else "")
            for e in events
            if run_id in (e.process_id, e.get("run_id"), e.get("latest_run_id"))
        ]
        config = dict(run["config"] or ())
        matching = [
            f"intent {i['intent_id']} ({i['state']}, {i['entry']}, run {i['run_id']},"
            f" created {i['created_at']})"
            for i in intents or []
            if i.get("columns") and _same_columns(config, i["columns"])
        ]
        invariant.check(
            False,
            (
                f"run {run_id} (SnakeLab id {run['id']}, {run['status']}, high score"
                f" {run['high_score']}, {run['episodes']} episodes) has no role in Ax3l;"
                f" events naming it: {', '.join(naming) or 'none'};"
                f" intents with its configuration: {', '.join(matching) or 'none'}"
            ),
        )
    return invariant


def _same_columns(config: dict[str, float], columns: dict[str, float]) -> bool:
    return all(
        config.get(c) is not None and math.isclose(config[c], v, rel_tol=1e-9, abs_tol=1e-12)
        for c, v in columns.items()
    )


def read_intents(conn: Any) -> list[dict[str, Any]]:
    """The submission intents, each with its configuration as SnakeLab's columns (``columns``,
    floats, like ``read_runs``'s configuration tuples)."""
    from ax3l.shared.config_schema import cached_schema

    schema = cached_schema()
    with conn.cursor() as cur:
        cur.execute(
            "SELECT intent_id, state, entry, run_id, created_at, content FROM submission_intents"
            " ORDER BY intent_id"
        )
        rows = cur.fetchall()
    intents = []
    for intent_id, state, entry, run_id, created_at, content in rows:
        columns: dict[str, float] = {}
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
            flat = schema.flatten(json.loads(content)["config"])
            columns = {c: float(v) for c, v in flat.items()}
        intents.append(
            {
                "intent_id": int(intent_id),
                "state": state,
                "entry": entry,
                "run_id": run_id,
                "created_at": created_at,
                "columns": columns,
            }
        )
    return intents


def check_invariants(conn: Any, snakelab_db: str) -> tuple[list[Invariant], dict[str, Any]]:
    """The chaos invariants over the whole history (issue 11's seven, then issue 21's two, each a
    function of its own); returns them and some counts."""
    events = read_events(conn)
    runs = read_runs(conn, snakelab_db)
    with conn.cursor() as cur:
        cur.execute("SELECT event_id, score, seed FROM experiment_highscores ORDER BY event_id")
        snapshots = {int(r[0]): (r[1], r[2]) for r in cur.fetchall()}
    by_run_id = {run["run_id"]: run for run in runs}
    results: list[Invariant] = []

    # 1. No configuration stored twice, except the loop's own rerun after a run that failed:
    #    the retry of a run that never trained (item 6), or a seeding/baseline run again after
    #    a failure (item 5), the latter recorded as ``attempt`` n on its submission.
    unique = Invariant(
        "no configuration stored twice in SnakeLab (retry after a never-started run, or a"
        " recorded baseline attempt after a failed one, excepted)"
    )
    attempts = {
        e.get("run_id") or e.process_id: e.get("attempt")
        for e in events
        if e.name == "simulation_submitted"
    }
    by_config: dict[Any, list[dict[str, Any]]] = {}
    for run in runs:
        by_config.setdefault(run["config"], []).append(run)
    repeats: Counter[str] = Counter()
    for group in by_config.values():
        for position, run in enumerate(group[1:], start=1):
            earlier = group[:position]
            if all(never_started(r) for r in earlier):
                kind = "after a never-started run"
            elif (
                all(
                    r["status"] in ("failed", "cancelled") or r["high_score"] is None
                    for r in earlier
                )
                and attempts.get(run["run_id"]) == position + 1
            ):
                kind = "recorded attempt after a failed run"
            else:
                kind = "VIOLATION"
            repeats[kind] += 1
            unique.check(
                kind != "VIOLATION",
                "config stored {}x: {}".format(
                    len(group),
                    ", ".join(
                        f"{r['run_id'][:8]} {r['status']} started={r['started']}"
                        f" episodes={r['episodes']} attempt={attempts.get(r['run_id'])}"
                        f" error={(r['error'] or '')[:80]!r}"
                        for r in group
                    ),
                ),
            )
        if len(group) == 1:
            unique.check(True, "")
    results.append(unique)

    # 2. No run submitted twice: one simulation_submitted per run id, one accepted proposal
    #    per checkpoint (a second one only after a never-started run).
    once = Invariant("no run submitted twice")
    submitted = Counter(
        e.get("run_id") or e.process_id for e in events if e.name == "simulation_submitted"
    )
    for run_id, n in submitted.items():
        once.check(n == 1, f"run {run_id} has {n} simulation_submitted events")
    checkpoint_of: dict[int, Ev] = {}
    current: Ev | None = None
    accepted_per_checkpoint: dict[int, list[Ev]] = {}
    late_adoptions = 0
    for event in events:
        if event.name == "round_robin_checkpoint":
            current = event
        elif current is not None:
            checkpoint_of[event.event_id] = current
            if event.name == "proposal_accepted":
                # A proposal answers the checkpoint it names (a late adoption names an older
                # one), else the latest before it: the orchestrator's rule.
                named = event.get("checkpoint_event_id")
                if isinstance(named, int) and named != current.event_id:
                    late_adoptions += 1
                owner = named if isinstance(named, int) else current.event_id
                accepted_per_checkpoint.setdefault(owner, []).append(event)
    for checkpoint_id, accepted in accepted_per_checkpoint.items():
        earlier_runs = [by_run_id.get(a.get("run_id") or a.process_id) for a in accepted[:-1]]
        once.check(
            all(r is not None and never_started(r) for r in earlier_runs),
            (
                f"checkpoint {checkpoint_id} has {len(accepted)} accepted proposals: "
                + ", ".join(
                    f"{a.event_id}:{(a.get('run_id') or '')[:8]}:{a.get('parameter')}"
                    for a in accepted
                )
            ),
        )
    results.append(once)

    # 3. Every SnakeLab run accounted for by an Ax3l event.
    accounted = Invariant("every SnakeLab run accounted for by an Ax3l event")
    known = set(submitted)
    for run in runs:
        accounted.check(
            run["run_id"] in known,
            (
                f"run {run['run_id']} ({run['status']}, SnakeLab id {run['id']})"
                " has no simulation_submitted event"
            ),
        )
    results.append(accounted)

    # 4 and 5. Checkpoints: at most one completed step each, of the checkpoint's own index; the
    #    next checkpoint one entry further after a completed step, the same one otherwise.
    checkpoints = [e for e in events if e.name == "round_robin_checkpoint"]
    completions_after: dict[int, list[Ev]] = {c.event_id: [] for c in checkpoints}
    for event in events:
        if event.name in STEP_EVENTS and event.event_id in checkpoint_of:
            completions_after[checkpoint_of[event.event_id].event_id].append(event)
    at_most_one = Invariant("each checkpoint followed by at most one completed step (its own)")
    for checkpoint in checkpoints:
        done = completions_after[checkpoint.event_id]
        at_most_one.check(
            len(done) <= 1 and all(d.get("index") == checkpoint.get("index") for d in done),
            (
                f"checkpoint {checkpoint.event_id} (index {checkpoint.get('index')}) followed by "
                + ", ".join(f"{d.name}#{d.event_id}(index {d.get('index')})" for d in done)
            ),
        )
    results.append(at_most_one)
    advance = Invariant(
        "consecutive checkpoints advance by one entry after a completed step, else not"
    )
    for first, second in itertools.pairwise(checkpoints):
        completed = bool(completions_after[first.event_id])
        expected = (first.get("index") + 1) % 7 if completed else first.get("index")
        advance.check(
            second.get("index") == expected,
            (
                f"checkpoint {first.event_id} index {first.get('index')} ->"
                f" {second.event_id} index {second.get('index')}"
                f" ({'after' if completed else 'without'} a completed step)"
            ),
        )
    results.append(advance)

    # 6. Every accepted proposal compared exactly once (the last may still be pending; a
    #    never-started run that was retried is not compared).
    compared_exactly_once = Invariant("every accepted proposal compared exactly once")
    comparisons = Counter(
        e.get("latest_run_id") or e.process_id for e in events if e.name == "configuration_compared"
    )
    accepted_all = [e for e in events if e.name == "proposal_accepted"]
    last_completion = max((e.event_id for e in events if e.name in STEP_EVENTS), default=0)
    for proposal in accepted_all:
        run_id = proposal.get("run_id") or proposal.process_id
        n = comparisons.get(run_id, 0)
        proposal_run = by_run_id.get(run_id)
        pending = proposal.event_id > last_completion and n == 0
        skipped_retry = n == 0 and proposal_run is not None and never_started(proposal_run)
        compared_exactly_once.check(
            n == 1 or pending or skipped_retry,
            (
                f"proposal for run {run_id}"
                f" ({proposal_run['status'] if proposal_run else 'no SnakeLab run'}) compared {n}x"
            ),
        )
    results.append(compared_exactly_once)

    # 7. Golden scores strictly increasing within a seed; each with its score snapshot.
    increasing = Invariant("golden scores strictly increasing within a seed")
    goldens = [e for e in events if e.name == "golden_config_created"]
    previous: Ev | None = None
    seen_seeds: list[Any] = []
    for golden in goldens:
        seed = golden.get("seed")
        snapshot = snapshots.get(golden.event_id)
        increasing.check(
            snapshot == (golden.get("high_score"), seed),
            (
                f"golden {golden.event_id} score/seed {golden.get('high_score')}/"
                f"{golden.get('seed')} but snapshot {snapshot}"
            ),
        )
        if previous is not None and previous.get("seed") == seed:
            increasing.check(
                golden.get("high_score") > previous.get("high_score"),
                (
                    f"seed {golden.get('seed')}: golden {golden.event_id}"
                    f" ({golden.get('kind')}) score {golden.get('high_score')} after"
                    f" {previous.event_id} score {previous.get('high_score')}"
                ),
            )
        elif previous is not None:
            increasing.check(
                seed not in seen_seeds,
                f"seed {golden.get('seed')} came back at {golden.event_id}",
            )
        seen_seeds.append(seed)
        previous = golden
    results.append(increasing)

    # 8 and 9 (issue 21): completed runs compared exactly once; every run has a role.
    intents = read_intents(conn)
    results.append(check_completed_runs_compared_once(events, runs))
    results.append(check_every_run_has_a_role(events, runs, intents))

    counts = {
        "events": len(events),
        "snakelab_runs": len(runs),
        "runs_by_status": dict(Counter(r["status"] for r in runs)),
        "never_started_failed_runs": sum(1 for r in runs if never_started(r)),
        "configs_repeated": dict(repeats),
        "checkpoints": len(checkpoints),
        "completed_steps": sum(1 for e in events if e.name in STEP_EVENTS),
        "accepted_proposals": len(accepted_all),
        "accepted_after_a_newer_checkpoint": late_adoptions,
        "goldens": len(goldens),
        "seeds": sorted({g.get("seed") for g in goldens if g.get("seed") is not None}),
        "seed_rotations": sum(1 for e in events if e.name == "seed_rotation_started"),
        "adopted_proposals": sum(
            1 for e in events if e.name == "proposal_accepted" and e.get("adopted")
        ),
        "retries": sum(1 for role in run_roles(events).values() if role == "retry"),
        "intents_by_state": dict(Counter(i["state"] for i in intents)),
    }
    return results, counts


@contextlib.contextmanager
def admin_connection(databases: TestDatabases) -> Iterator[Any]:
    conn = databases.connect("admin", databases.ax3l_db)
    try:
        yield conn
    finally:
        conn.close()


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
