"""A child process under test: launched with its output in a log file, waited on until it is
ready, stopped or killed, its log's tail shown when it fails.

Every process the tests, the stack under test and the benchmarks start (the reference
SnakeLab, the toolbroker, the orchestrator, the report server, the scripted model) is one of
these. ``new_session`` gives it a process group of its own, so ``kill`` and ``stop`` reach its
children too (the orchestrator's MCP sessions).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from ax3l.shared.waiting import WaitTimeout, wait_until, wait_until_async


class ProcessFailed(AssertionError):
    """A managed process exited, did not become ready, or did not exit in time."""


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
    ):
        self.name = name
        self.log_path = log_path
        self.new_session = new_session
        self.log_lines = log_lines
        with contextlib.ExitStack() as files:
            log = None
            if log_path is not None:
                log_path.parent.mkdir(parents=True, exist_ok=True)
                log = files.enter_context(log_path.open("ab"))
            self.popen = subprocess.Popen(
                list(args),
                env=dict(env),
                stdout=log,
                stderr=subprocess.STDOUT if log is not None else None,
                start_new_session=new_session,
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
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
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
