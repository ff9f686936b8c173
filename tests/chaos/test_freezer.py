"""The chaos harness's freezes on real processes (fast: part of `make test`): a frozen process
is stopped and resumed, a kill of a frozen one works and the supervisor restarts it, and
nothing stays stopped after ``resume_all``."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from ax3l.shared.processes import ManagedProcess
from ax3l.shared.stack.supervisor import Child, RestartPolicy, Supervisor
from ax3l.shared.waiting import wait_until
from ax3l.testing.chaos import Freezer, _pid_state

SLEEPER = [sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"]


def _state(proc: Child, wanted: str | tuple[str, ...]) -> bool:
    """Whether the process reaches ``wanted`` (a stop or continue lands when it is scheduled)."""
    pid = proc.pid()
    assert pid is not None
    wanted = (wanted,) if isinstance(wanted, str) else wanted
    wait_until(lambda: _pid_state(pid) in wanted, 5, interval=0.01)
    return True


RUNNING = ("S", "R")


def _sleeper(tmp_path: Path, supervisor: Supervisor | None = None) -> Child:
    log = tmp_path / "sleeper.log"
    proc = Child(
        "sleeper",
        lambda: ManagedProcess("sleeper", SLEEPER, {}, log, new_session=True),
        log_path=log,
        rng=random.Random(1),
    )
    supervisor = supervisor or Supervisor([])
    supervisor.add(proc)
    supervisor.launch(proc)
    return proc


def test_a_freeze_stops_the_process_and_resumes_it_after_its_time(tmp_path: Path) -> None:
    proc = _sleeper(tmp_path)
    freezer = Freezer()
    try:
        assert freezer.freeze("sleeper", proc.pids(), 0.5) == 1
        assert _state(proc, "T")
        assert freezer.is_frozen("sleeper")
        assert freezer.wait_thawed(5)
        assert _state(proc, RUNNING)
    finally:
        freezer.resume_all()
        proc.kill9()


def test_resume_all_ends_every_freeze_at_once(tmp_path: Path) -> None:
    """What the driver's ``finally`` does when it fails: nothing stays stopped."""
    proc = _sleeper(tmp_path)
    freezer = Freezer()
    try:
        freezer.freeze("sleeper", proc.pids(), 60)
        assert _state(proc, "T")
        freezer.resume_all()
        assert _state(proc, RUNNING)
        assert not freezer.frozen()
        assert freezer.freeze("sleeper", proc.pids(), 60) == 0  # closed: no new freezes
    finally:
        freezer.resume_all()
        proc.kill9()


def test_a_frozen_service_killed_is_restarted_and_not_frozen(tmp_path: Path) -> None:
    """SIGKILL ends a stopped process; the supervisor restarts it as killed, and the freeze's
    resume never signals the new process (another pid, or the same pid with another start)."""
    supervisor = Supervisor([], RestartPolicy(give_up_after=None, kill_delay=(0.05, 0.1)))
    proc = service = _sleeper(tmp_path, supervisor)
    supervisor.watch_in_threads()
    freezer = Freezer()
    try:
        first = proc.pid()
        freezer.freeze("sleeper", service.pids(), 60)
        assert service.alive()  # a stopped process is alive: no restart
        service.kill9()
        wait_until(lambda: proc.pid() != first and supervisor.all_up(), 10)
        assert [(r.service, r.killed, r.ok) for r in supervisor.restarts] == [
            ("sleeper", True, True)
        ]
        assert not supervisor.deaths
        assert _state(proc, RUNNING)
        freezer.resume("sleeper")  # the old process is gone: nothing to resume
        assert _state(proc, RUNNING)
    finally:
        freezer.resume_all()
        supervisor.stop_watching()
        proc.kill9()
