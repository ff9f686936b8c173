"""Chaos harness: the whole stack as supervised real processes, killed with SIGKILL and frozen
with SIGSTOP at random.

The stack's processes are supervised by ``ax3l.shared.stack.supervisor`` (a kill the driver
makes through ``Child.kill9`` is restarted after a short random delay, a death on its own with
backoff and recorded: a finding; a frozen process is alive, and a SIGKILL ends it like any
other), MariaDB too (``ax3l.shared.stack.mariadb``). ``Freezer`` SIGSTOPs a service's processes
and SIGCONTs them after a while, and always resumes whatever it stopped (``resume_all``).
``Probe`` is the driver's own short-timeout connection (what a submission looks like in the
database, to time a freeze to it). ``ProgressMonitor`` samples the number of completed steps so
recovery times can be measured. The history invariants the run is checked against are
``ax3l.testing.invariants``. Test-only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from ax3l.shared.waiting import WaitTimeout, wait_until
from ax3l.testing.databases import TestDatabases, mysql_connection
from ax3l.testing.invariants import STEP_EVENTS as STEP_EVENTS  # also bench_soak's


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


def came_true(condition: Callable[[], object], timeout: float, interval: float = 0.1) -> bool:
    """Whether ``condition`` came true within ``timeout`` (if not, a finding, not an error)."""
    try:
        wait_until(condition, timeout, interval=interval)
    except WaitTimeout:
        return False
    return True


@dataclass(frozen=True)
class Stopped:
    """One SIGSTOPped process: its pid and start time (a reused pid is another process)."""

    pid: int
    start_time: int


class Freezer:
    """Freezes services with SIGSTOP and resumes them with SIGCONT ``seconds`` later.

    Every stopped process is remembered before it is stopped and forgotten only once resumed,
    so ``resume_all`` (called by the driver's ``finally`` and by the stack's teardown) leaves
    nothing stopped, whatever failed. A process killed while frozen is simply gone; a resume
    skips it. One freeze per victim at a time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped: dict[str, list[Stopped]] = {}
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()

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
        return came_true(lambda: not self.frozen(), timeout, interval=0.05)

    def resume_all(self) -> None:
        """Resume everything still stopped now, and end the freezes' threads."""
        self._closing.set()
        for name in list(self._stopped):
            self.resume(name)
        for thread in self._threads:
            thread.join(5)


TIMEOUTS = {"connect_timeout": 1, "read_timeout": 1, "write_timeout": 1}


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

    def number(self, sql: str, args: tuple[Any, ...] = ()) -> int | None:
        """The first column of the first row as an int, or None (no row, or no answer)."""
        try:
            if self._conn is None:
                db = self.databases
                self._conn = mysql_connection(
                    db.host, db.port, db.admin_user, db.admin_password, db.ax3l_db, **TIMEOUTS
                )
            with self._conn.cursor() as cur:
                cur.execute(sql, args)
                row = cur.fetchone()
                return None if row is None else int(row[0])
        except pymysql.err.MySQLError:
            self.close()
            return None

    def steps(self) -> int | None:
        """Completed steps (comparisons and exhausted turns)."""
        return self.number("SELECT COUNT(*) FROM events WHERE name IN (%s, %s)", STEP_EVENTS)

    def last_tool_request(self) -> int | None:
        """The newest ``tool_request_received`` event: the broker's first write for a proposal,
        just before its checks, its intent and ``simulation.submit``."""
        return self.number(
            "SELECT COALESCE(MAX(event_id), 0) FROM events WHERE name = 'tool_request_received'"
        )

    def last_intent(self) -> int | None:
        """The newest submission intent: the broker's last write before ``simulation.submit``
        (SnakeLab stores the run a few milliseconds later)."""
        return self.number("SELECT COALESCE(MAX(intent_id), 0) FROM submission_intents")

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

    def _run(self) -> None:
        while not self._stop.is_set():
            value = self._probe.steps()
            if value is not None:
                self.samples.append((time.monotonic(), value))
            self._stop.wait(self.interval)

    def latest(self) -> int:
        return self.samples[-1][1] if self.samples else 0

    def first_above(self, after: float, value: int) -> float | None:
        """When the count first exceeded ``value`` at or after time ``after``."""
        return next((at for at, count in self.samples if at >= after and count > value), None)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def admin_connection(databases: TestDatabases) -> Any:
    """An admin connection to Ax3l's database (``with`` closes it)."""
    return databases.connect("admin", databases.ax3l_db)
