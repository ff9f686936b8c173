"""A child process with its output in a log file: launched, waited on until it is ready,
stopped or killed, its log's tail shown when it fails.

Every process Ax3l starts as a child is one: the services of ``scripts/stack.py`` (``make
run``/``make start``), those of each ``ax3l-compare`` repeat, and every process the tests and
benchmarks start (the reference SnakeLab, the toolbroker, the orchestrator, the report server,
the scripted model). ``new_session`` gives it a process group of its own, so ``kill`` and
``stop`` reach its children too (the orchestrator's MCP sessions). ``end_group`` stops a group
by pid alone, for a process that is not our child (one a previous supervisor left running).
``descendants`` is psutil's (1.9 ms a call against 2.4 ms of the /proc scan it replaced);
``process_alive`` stays hand-written, psutil's ``Process(pid).status()`` being slower (32 us
against 21 us; both figures from ``bench/bench_processes.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import psutil

from ax3l.shared.waiting import WaitTimeout, wait_until, wait_until_async


class ProcessFailed(AssertionError):
    """A managed process exited, did not become ready, or did not exit in time (an
    ``AssertionError``, so that in a test it reads as a failed check)."""


def process_alive(pid: int) -> bool:
    """True for a live process (a zombie, killed but not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def descendants(root: int) -> list[int]:
    """Every descendant of ``root`` (psutil reads /proc: the MCP SDK starts the orchestrator's
    children in sessions of their own, which a group signal misses); none when ``root`` is
    gone."""
    try:
        return [child.pid for child in psutil.Process(root).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_all(pids: Sequence[int]) -> None:
    """SIGKILL each of ``pids`` that still exists."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def exit_text(code: int | None) -> str:
    """``exited with 1``, ``was killed by SIGKILL``, or ``exited`` (code unknown)."""
    if code is None:
        return "exited"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
    return f"exited with {code}"


def signal_group(pid: int, sig: int) -> None:
    """``sig`` to the process group led by ``pid``, if it still exists."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def end_group(pid: int, timeout: float = 15.0, reap: Callable[[], object] | None = None) -> None:
    """SIGTERM the process group led by ``pid`` and wait for its leader; SIGKILL the group
    after ``timeout``. ``reap`` (between looks) collects the leader when it is our child."""

    def gone() -> bool:
        if reap is not None:
            reap()
        return not process_alive(pid)

    signal_group(pid, signal.SIGTERM)
    try:
        wait_until(gone, timeout, "the process to stop", interval=0.1)
    except WaitTimeout:
        signal_group(pid, signal.SIGKILL)
        with contextlib.suppress(WaitTimeout):
            wait_until(gone, 5.0, "the process to die", interval=0.1)
    # The group's other members (an orchestrator's MCP children) go with it.
    signal_group(pid, signal.SIGKILL)


def http_ok(url: str, timeout: float = 0.5) -> bool:
    """Whether a GET of ``url`` answers 200: a service's ``/health`` as a ``wait_ready``."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class ManagedProcess:
    """One running child process whose stdout and stderr go to ``log_path`` (appended), or
    to this process's own output when ``log_path`` is None (a benchmark's terminal)."""

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        env: Mapping[str, str],
        log_path: Path | None,
        *,
        new_session: bool = False,
        log_lines: int = 60,
        cwd: Path | None = None,
        stdin: int | None = None,
    ):
        self.name = name
        self.log_path = log_path
        self.new_session = new_session
        self.log_lines = log_lines
        self.log_offset = 0  # where this process's output starts in its log
        with contextlib.ExitStack() as files:
            log = None
            if log_path is not None:
                log_path.parent.mkdir(parents=True, exist_ok=True)
                self.log_offset = log_path.stat().st_size if log_path.exists() else 0
                log = files.enter_context(log_path.open("ab"))
            self.popen = subprocess.Popen(
                list(args),
                env=dict(env),
                stdout=log,
                stderr=subprocess.STDOUT if log is not None else None,
                start_new_session=new_session,
                cwd=cwd,
                stdin=stdin,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int | None = None) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-(lines or self.log_lines) :])

    def output_since_start(self, lines: int = 8) -> str:
        """The last non-blank lines this process wrote to its log (why it died)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as log:
            # A log rotated since the start (ax3l.shared.logrotate) is shorter: read it all.
            if os.fstat(log.fileno()).st_size >= self.log_offset:
                log.seek(self.log_offset)
            text = log.read().decode(errors="replace")
        return "\n".join([line for line in text.splitlines() if line.strip()][-lines:])

    def pids(self) -> list[int]:
        """The process and its descendants, parent first (what a freeze stops); none once it
        exited."""
        return [self.pid, *descendants(self.pid)] if self.alive() else []

    def kill_tree(self) -> None:
        """SIGKILL the process, its group and every descendant (also those in sessions of their
        own), as a control group's kill would."""
        others = descendants(self.pid)
        if self.new_session:
            signal_group(self.pid, signal.SIGKILL)
        kill_all([self.pid, *others])
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)

    def failure(self, what: str) -> ProcessFailed:
        """``<name> <what>`` with the log's path and tail."""
        return ProcessFailed(f"{self.name} {what} (log {self.log_path}):\n{self.log_tail()}")

    def exited(self) -> str | None:
        """Why waiting on this process is pointless (it exited), or None while it runs."""
        return None if self.alive() else f"exited with {self.popen.returncode}"

    def wait_ready(self, ready: Callable[[], object], timeout: float = 30.0) -> None:
        """Poll ``ready`` until truthy; fail at once if the process exits meanwhile."""
        try:
            wait_until(ready, timeout, interval=0.05, give_up=self.exited)
        except WaitTimeout:
            raise self._not_ready(timeout) from None

    async def wait_ready_async(
        self,
        ready: Callable[[], object] | Callable[[], Awaitable[object]],
        timeout: float = 30.0,  # noqa: ASYNC109 - polled, as in wait_ready
    ) -> None:
        """``wait_ready`` inside an event loop (``ready`` may be a coroutine function)."""
        try:
            await wait_until_async(ready, timeout, interval=0.05, give_up=self.exited)
        except WaitTimeout:
            raise self._not_ready(timeout) from None

    def _not_ready(self, timeout: float) -> ProcessFailed:
        return self.failure(self.exited() or f"not ready after {timeout:g}s")

    async def wait_exit_async(self, timeout: float = 30.0) -> int:  # noqa: ASYNC109 - polled
        """The exit code, once it exits within ``timeout``, without blocking the loop."""
        try:
            await wait_until_async(lambda: not self.alive(), timeout, interval=0.05)
        except WaitTimeout:
            raise self.failure(f"still runs after {timeout}s") from None
        return int(self.popen.returncode)

    def wait(self, timeout: float) -> int:
        """The exit code, once it exits on its own within ``timeout``."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise self.failure(f"still runs after {timeout}s") from None

    def kill(self) -> None:
        """SIGKILL (its whole group with ``new_session``), as in a crash."""
        if self.new_session:
            signal_group(self.popen.pid, signal.SIGKILL)
        elif self.alive():
            self.popen.send_signal(signal.SIGKILL)
        if self.popen.poll() is None:
            self.popen.wait(10)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait; SIGKILL after ``timeout`` (with ``new_session``, the group's
        leftovers are killed in any case). Returns the exit code."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        if self.new_session or self.alive():
            self.kill()
        return self.popen.returncode

    def stop_group(self, timeout: float = 15.0) -> int | None:
        """``end_group`` for this process (with ``new_session``): the SIGTERM reaches its
        children too, so they shut down on their own. Returns the exit code."""
        end_group(self.popen.pid, timeout, reap=self.popen.poll)
        return self.popen.poll()
