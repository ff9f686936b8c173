"""One supervisor for the stack's services, with compose's ``restart: unless-stopped`` policy.

A service that exits is started again after a backoff that doubles from
``RestartPolicy.backoff_start`` up to ``backoff_max`` and starts over once the service had run
for ``quick_crash_seconds``; after ``give_up_after`` quick crashes in a row the supervisor gives
up (``GaveUp``). ``make run`` (``scripts/stack.py``) polls ``watch_all`` from its main loop; the
chaos tier runs a watcher thread per service (``watch_in_threads``, so a MariaDB that takes
seconds to start delays no other restart) and uses the hooks a chaos driver needs: ``Child.kill9``
(a kill the driver made is restarted after a random ``kill_delay`` and is no death) and
``Child.pids`` (what a freeze stops). A stopped (SIGSTOPped) process is alive: no restart policy
restarts a frozen service, and a SIGKILL ends it like any other. ``deaths`` and ``restarts``
record what happened. With a ``LogRotation``, ``watch_all`` also keeps each service's log
size-bounded (``ax3l.shared.logrotate``).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from ax3l.shared.logrotate import LogRotation
from ax3l.shared.processes import descendants, end_group, exit_text, kill_all, process_alive
from ax3l.shared.waiting import WaitTimeout, wait_until

# Seconds between two looks at the logs' sizes (a log may pass its bound by what its service
# writes in that time).
ROTATION_CHECK_INTERVAL = 1.0


class Running(Protocol):
    """What a supervisor looks after: a ``ManagedProcess``, an ``Adopted`` one, a MariaDB."""

    @property
    def pid(self) -> int | None: ...
    @property
    def returncode(self) -> int | None: ...
    def alive(self) -> bool: ...
    def pids(self) -> list[int]: ...
    def kill_tree(self) -> None: ...
    def stop_group(self, timeout: float = ...) -> object: ...
    def output_since_start(self, lines: int = ...) -> str: ...


class Adopted:
    """A service a previous supervisor left running: known by its pid alone."""

    returncode = None

    def __init__(self, pid: int):
        self.pid = pid

    def alive(self) -> bool:
        return process_alive(self.pid)

    def pids(self) -> list[int]:
        return [self.pid, *descendants(self.pid)] if self.alive() else []

    def kill_tree(self) -> None:
        kill_all(self.pids())

    def stop_group(self, timeout: float = 15.0) -> None:
        end_group(self.pid, timeout)

    def output_since_start(self, lines: int = 8) -> str:
        return ""


@dataclass(frozen=True)
class RestartPolicy:
    backoff_start: float = 0.5
    backoff_max: float = 60.0
    quick_crash_seconds: float = 10.0  # a crash sooner after a start is a quick one
    give_up_after: int | None = 10  # quick crashes in a row; None: never give up
    kill_delay: tuple[float, float] = (0.2, 2.0)  # after a driver's kill (uniform)

    def backoff(self, quick_crashes: int) -> float:
        return float(min(self.backoff_start * 2**quick_crashes, self.backoff_max))


class GaveUp(Exception):
    """A service crashed too often right after starting."""


@dataclass
class Death:
    """A service ended without being killed through ``Child.kill9``."""

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


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Child:
    """One supervised service: how to start it, its current process and its record."""

    def __init__(
        self,
        name: str,
        launch: Callable[[], Running],
        *,
        log_path: Path | None = None,
        healthy: Callable[[], bool] | None = None,
        rng: random.Random | None = None,
    ):
        self.name = name
        self.launch = launch
        self.log_path = log_path
        self.healthy = healthy or (lambda: True)
        self.rng = rng or random.Random()
        self.proc: Running | None = None
        self.started = 0.0
        self.started_at = ""
        self.died_at = 0.0
        self.restarts = 0
        self.quick_crashes = 0
        self.restart_at: float | None = None  # set while backing off
        self.launching = False
        self.last_exit: str | None = None
        self.killed_pending = False
        self.killed = False  # the last exit was a driver's kill
        self.lock = threading.Lock()

    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    @property
    def restarting(self) -> bool:
        return self.launching or self.restart_at is not None

    def pids(self) -> list[int]:
        """Its processes, parent first: what a freeze stops."""
        return [] if self.proc is None else self.proc.pids()

    def output_since_start(self, lines: int = 8) -> str:
        """What its current process wrote (why it died)."""
        return "" if self.proc is None else self.proc.output_since_start(lines)

    def kill9(self) -> None:
        """The chaos driver's kill: SIGKILL everything; restarted as killed, not as a death."""
        with self.lock:
            self.killed_pending = True
            if self.proc is not None:
                self.proc.kill_tree()

    def record(self) -> dict[str, Any]:
        if self.restart_at is not None:
            state = "backing off"
        else:
            state = "running" if self.alive() else "stopped"
        return {
            "pid": self.pid(),
            "state": state,
            "restarts": self.restarts,
            "started_at": self.started_at,
            "last_exit": self.last_exit,
        }


class Supervisor:
    """Starts the children in order and keeps them running; subclasses hear of each change
    through ``note``, ``launched``, ``exited`` and ``changed``."""

    def __init__(
        self,
        children: list[Child],
        policy: RestartPolicy | None = None,
        rotation: LogRotation | None = None,
    ):
        self.rotation = rotation
        self.next_rotation_check = 0.0
        self.children: list[Child] = []
        self.services: dict[str, Child] = {}
        for child in children:
            self.add(child)
        self.policy = policy or RestartPolicy()
        self.deaths: list[Death] = []
        self.restarts: list[Restart] = []
        self.stopping = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def add(self, child: Child) -> None:
        self.children.append(child)
        self.services[child.name] = child

    # -- hooks --------------------------------------------------------------------------------

    def note(self, message: str, child: Child | None = None) -> None:
        """One line about the stack, also in the service's own log when it is about one."""
        if child is not None and child.log_path is not None:
            with child.log_path.open("a") as log:
                log.write(f"==== {now_text()} stack: {message}\n")

    def launched(self, child: Child) -> None:
        """``child`` has a new process."""

    def exited(self, child: Child) -> None:
        """``child``'s process is gone."""

    def changed(self) -> None:
        """A record changed (a start, an exit, a restart)."""

    # -- processes ----------------------------------------------------------------------------

    def launch(self, child: Child) -> None:
        child.launching = True
        try:
            child.proc = child.launch()
        finally:
            child.launching = False
        self.adopt(child, child.proc)
        self.launched(child)

    def adopt(self, child: Child, proc: Running) -> None:
        """Look after ``proc`` (already running) as ``child``'s process."""
        child.proc = proc
        child.started, child.started_at = time.monotonic(), now_text()
        child.restart_at = None

    def watch(self, child: Child) -> None:
        """Restart a service that exited, with backoff; raise GaveUp after quick crashes."""
        if child.restart_at is not None:
            if time.monotonic() >= child.restart_at:
                self._restart(child)
            return
        if child.proc is None or child.launching or child.alive():
            return
        now = time.monotonic()
        uptime = now - child.started
        with child.lock:
            child.killed, child.killed_pending = child.killed_pending, False
        child.died_at = now
        child.last_exit = f"{exit_text(child.proc.returncode)} after {uptime:.1f} s at {now_text()}"
        self.exited(child)
        if child.killed:
            delay = child.rng.uniform(*self.policy.kill_delay)
        else:
            quick = uptime < self.policy.quick_crash_seconds
            child.quick_crashes = child.quick_crashes + 1 if quick else 0
            with self._lock:
                self.deaths.append(
                    Death(child.name, now, child.proc.returncode, child.proc.output_since_start())
                )
            limit = self.policy.give_up_after
            if limit is not None and child.quick_crashes >= limit:
                message = (
                    f"{child.name} crashed {child.quick_crashes} times in a row within"
                    f" {self.policy.quick_crash_seconds:g} s of starting; giving up; see"
                    f" {child.log_path}"
                )
                self.note(message, child)
                raise GaveUp(message)
            delay = self.policy.backoff(child.quick_crashes)
        child.restart_at = now + delay
        self.note(
            f"{child.name} {child.last_exit}; restarting in {delay:g} s"
            f" (restart {child.restarts + 1})",
            child,
        )
        self.changed()

    def _restart(self, child: Child) -> None:
        child.restarts += 1
        killed = child.killed
        try:
            self.launch(child)
        except Exception as exc:
            # Not started (MariaDB's script failed): try again after the next backoff.
            child.quick_crashes += 1
            child.restart_at = time.monotonic() + self.policy.backoff(child.quick_crashes)
            restart = Restart(
                child.name, child.died_at, time.monotonic(), killed, False, str(exc)[-2000:]
            )
        else:
            restart = Restart(child.name, child.died_at, time.monotonic(), killed, True)
            pid = child.pid()
            self.note(f"{child.name} restarted (pid {pid}, restart {child.restarts})", child)
        with self._lock:
            self.restarts.append(restart)
        self.changed()

    def watch_all(self) -> None:
        for child in self.children:
            self.watch(child)
        self.rotate_logs()

    # -- logs -----------------------------------------------------------------------------------

    def logs(self) -> list[Path | None]:
        """The logs ``rotation`` keeps bounded: each child's."""
        return [child.log_path for child in self.children]

    def rotate_logs(self) -> None:
        """Rotate the logs that reached ``rotation``'s bound (at most once a
        ``ROTATION_CHECK_INTERVAL``); a failure (a full disk) is noted and tried again later."""
        if self.rotation is None or time.monotonic() < self.next_rotation_check:
            return
        self.next_rotation_check = time.monotonic() + ROTATION_CHECK_INTERVAL
        for path in self.logs():
            if path is None:
                continue
            try:
                rotated = self.rotation.rotate(path)
            except OSError as exc:
                self.note(f"could not rotate {path}: {exc}")
                continue
            if rotated:
                child = next((c for c in self.children if c.log_path == path), None)
                self.note(f"log rotated at {self.rotation.max_bytes} bytes ({path.name})", child)

    def all_up(self) -> bool:
        return all(child.alive() and not child.restarting for child in self.children)

    def start_all(self, timeout: float, begin: Callable[[Child], None] | None = None) -> None:
        """Start the children in order (``begin``, default ``launch``), each once it answers
        its health check (at most ``timeout`` s each), watching those already started."""
        for child in self.children:
            if self.stopping:
                return
            (begin or self.launch)(child)
            try:
                wait_until(partial(self._started, child), timeout, interval=0.2)
            except WaitTimeout:
                self.note(
                    f"{child.name} not healthy after {timeout:g} s; going on (see {child.log_path})"
                )
            else:
                if not self.stopping:
                    self.note(f"{child.name} started (pid {child.pid()})")
            self.changed()

    def _started(self, child: Child) -> bool:
        if self.stopping:
            return True
        self.watch_all()
        return child.restart_at is None and child.alive() and child.healthy()

    def watch_in_threads(self) -> None:
        """Watch each child from a thread of its own until ``stop_watching``."""
        for child in self.children:
            thread = threading.Thread(
                target=self._watch_loop, args=(child,), name=f"supervise-{child.name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _watch_loop(self, child: Child) -> None:
        while not self._stop.wait(0.05):
            self.watch(child)

    def stop_watching(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def stop_child(self, child: Child, timeout: float = 15.0) -> None:
        """SIGTERM to its group, SIGKILL after ``timeout``, and whatever of its is left (the
        children it started in sessions of their own)."""
        child.restart_at = None
        proc = child.proc
        if proc is not None and proc.alive():
            leftovers = proc.pids()[1:]
            proc.stop_group(timeout)
            kill_all(leftovers)
            self.note(f"{child.name} stopped")
        self.exited(child)

    def stop_all(self, timeout: float = 15.0) -> None:
        """Stop the children, last started first."""
        for child in reversed(self.children):
            self.stop_child(child, timeout)
