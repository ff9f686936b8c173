"""A repeat's services forked from one pre-imported parent instead of each importing itself.

Importing the orchestrator (FastAPI, uvicorn, optuna...), the toolbroker and the reference
SnakeLab costs about 2 s of CPU per repeat, a third of what a 50-run repeat costs on the 0 s
surrogate. ``ax3l-compare`` therefore starts one *preloader* per comparison
(``python -m ax3l.compare.preload``, with only the environment any Python process needs): it
imports those modules once and then, for each request on its stdin (one JSON line: the
service's ``-m`` module, its arguments, its whole environment and its log file), forks a child
that starts a session of its own, sends its output to the log, replaces its environment with
the request's and runs the module as ``python -m`` would. Nothing is shared between the
children but the imported code: each reads its own settings at start, as a fresh process does.

The children are the preloader's, not ``ax3l-compare``'s: ``Forked`` watches and stops one by
its pid and process group (``ax3l.shared.processes.end_group``); the preloader ignores
``SIGCHLD`` so they never linger as zombies, and restores it in each child (the orchestrator
waits for its own children). With ``--spawn exec`` every service is a plain ``python -m``
process (``processes.launch``).

Nothing outlives the process that started the preloader (``ax3l-compare``, or the Ray worker
running a repeat's task): on Linux the preloader asks for SIGKILL when its parent dies and each
child for SIGTERM when the preloader dies (``prctl(PR_SET_PDEATHSIG)``). A repeat whose process
is killed (``kill -9``, its Ray node lost) therefore stops its services, which otherwise would
run on, in sessions of their own, against databases another attempt drops.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib
import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from ax3l.shared.processes import ProcessFailed, end_group, process_alive
from ax3l.shared.waiting import WaitTimeout, wait_until

# What the services import; ``-m`` modules are run from these.
PRELOADED = (
    "snakelab.server",
    "ax3l.toolbroker.main",
    "ax3l.orchestrator.main",
    "ax3l.orchestrator.proposers.tpe",
    "anyio._backends._asyncio",
)
ANSWER_TIMEOUT = 30.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(sig: int, parent: int) -> None:
    """Have the kernel send ``sig`` to this process when its parent (``parent``) dies; exit at
    once when it is dead already. Linux only (elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() != parent:  # it died before the request
        os._exit(1)


class Forked:
    """A service forked by the preloader: the part of ``ManagedProcess`` a repeat uses."""

    def __init__(self, name: str, pid: int, log_path: Path, log_lines: int = 30):
        self.name = name
        self.pid = pid
        self.log_path = log_path
        self.log_lines = log_lines

    def alive(self) -> bool:
        return process_alive(self.pid)

    def exited(self) -> str | None:
        return None if self.alive() else "exited"

    def log_tail(self, lines: int | None = None) -> str:
        if not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-(lines or self.log_lines) :])

    def failure(self, what: str) -> ProcessFailed:
        return ProcessFailed(f"{self.name} {what} (log {self.log_path}):\n{self.log_tail()}")

    def wait_ready(self, ready: Callable[[], object], timeout: float = 30.0) -> None:
        try:
            wait_until(ready, timeout, interval=0.02, give_up=self.exited)
        except WaitTimeout:
            raise self.failure(f"was not ready within {timeout:g} s") from None

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM its process group, SIGKILL after ``timeout``."""
        end_group(self.pid, timeout)


class Preloader:
    """The client of one preloader process; safe to call from the repeats' threads."""

    def __init__(self, environ: Mapping[str, str]):
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "ax3l.compare.preload", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(environ),
            text=True,
        )

    def launch(self, name: str, args: list[str], env: dict[str, str], log_path: Path) -> Forked:
        """``args`` as ``processes.launch`` takes them (``[python, "-m", module, ...]``)."""
        if args[1:2] != ["-m"]:
            raise ValueError(f"{name}: only python -m services are preloaded")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        request = {"module": args[2], "argv": args[3:], "env": env, "log": str(log_path)}
        with self._lock:
            stdin, stdout = self._process.stdin, self._process.stdout
            assert stdin is not None and stdout is not None
            try:
                stdin.write(json.dumps(request) + "\n")
                stdin.flush()
                answer = json.loads(stdout.readline() or "{}")
            except (OSError, ValueError) as exc:
                raise ProcessFailed(f"the preloader did not fork {name}: {exc}") from exc
        if "pid" not in answer:
            raise ProcessFailed(f"the preloader did not fork {name}: {answer.get('error')}")
        return Forked(name, int(answer["pid"]), log_path)

    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        """Close its stdin (it exits at the end of it) and wait; its children are not ended
        here (each repeat stops its own)."""
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        try:
            self._process.wait(ANSWER_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


# -- the preloader process ---------------------------------------------------------------------


def serve(requests: IO[str], answers: IO[str]) -> None:
    """Fork a child for each request line until stdin closes."""
    me = os.getpid()
    for module in PRELOADED:
        importlib.import_module(module)
    # The schema's revisions, read once from alembic's scripts (cached): every service checks
    # its database against them at start, which otherwise imports alembic in each child.
    importlib.import_module("ax3l.shared.db.upgrades").revisions()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    for line in requests:
        try:
            request = json.loads(line)
            pid = os.fork()
        except (ValueError, OSError) as exc:
            answers.write(json.dumps({"error": str(exc)}) + "\n")
            answers.flush()
            continue
        if pid == 0:
            _child(request, me)  # never returns
        answers.write(json.dumps({"pid": pid}) + "\n")
        answers.flush()


def _child(request: dict[str, Any], preloader: int) -> None:
    code: Any = 1
    try:
        die_with_parent(signal.SIGTERM, preloader)
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        # New file objects on the redirected descriptors, which live as long as the process.
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own stdin)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 (its stdout)
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115 (its stderr)
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [request["module"], *request["argv"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # the child must never return into the server's loop
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0 if code is None else code if isinstance(code, int) else 1)


if __name__ == "__main__":
    if len(sys.argv) > 1:  # the pid of the process that started it
        die_with_parent(signal.SIGKILL, int(sys.argv[1]))
    serve(sys.stdin, sys.stdout)
