"""Logs under ``.run/logs`` stay bounded: ``make run``'s supervisor rotates each service's log at
``AX3L_STACK_LOG_MAX_MB`` and keeps ``AX3L_STACK_LOG_KEEP`` older generations, while the service
goes on writing to the same open file (``ax3l.shared.logrotate``: copy, then truncate)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import stack  # scripts/stack.py (pyproject's pytest pythonpath)

from ax3l.shared import logrotate
from ax3l.shared.logrotate import LogRotation, generation
from ax3l.shared.processes import ManagedProcess
from ax3l.shared.stack import supervisor
from ax3l.shared.stack.supervisor import Child, RestartPolicy, Supervisor

# A service that writes numbered lines, one write each, as fast as a busy service logs.
CHATTY = (
    "import itertools, sys, time\n"
    "for n in itertools.count():\n"
    "    sys.stdout.write(f'line {n:08d} ' + 'x' * 40 + '\\n')\n"
    "    sys.stdout.flush()\n"
    "    time.sleep(0.002)\n"
)


def numbers(text: str) -> list[int]:
    """The service's line numbers in a log's text (the supervisor's own notes left out)."""
    return [int(line.split()[1]) for line in text.splitlines() if line.startswith("line ")]


def test_a_service_log_rotates_at_the_bound_and_keeps_n_generations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running service's log is rotated each time it reaches the bound; exactly ``keep``
    older generations remain, each at least the bound; the service, never restarted, goes on
    writing at the start of the truncated log (no hole of zeros), and the lines run in order
    across the generations, none repeated."""
    monkeypatch.setattr(supervisor, "ROTATION_CHECK_INTERVAL", 0.02)
    log = tmp_path / "logs" / "chatty.log"
    bound, keep = 8192, 3

    def launch() -> ManagedProcess:
        return ManagedProcess("chatty", [sys.executable, "-c", CHATTY], {}, log, new_session=True)

    notes: list[str] = []

    class Recording(Supervisor):
        def note(self, message: str, child: Child | None = None) -> None:
            notes.append(message)
            super().note(message, child)

    chatty = Child("chatty", launch, log_path=log)
    watcher = Recording([chatty], RestartPolicy(give_up_after=1), LogRotation(bound, keep))
    watcher.launch(chatty)
    pid = chatty.pid()
    try:
        deadline = time.monotonic() + 20
        while sum("log rotated" in n for n in notes) < keep + 2:
            assert time.monotonic() < deadline, f"not rotated {keep + 2} times: {notes}"
            assert chatty.alive(), chatty.output_since_start()
            watcher.watch_all()
            time.sleep(0.01)
    finally:
        watcher.stop_all(5)
    assert chatty.pid() == pid and watcher.restarts == []

    generations = [generation(log, number) for number in range(1, keep + 1)]
    assert all(path.exists() for path in generations)
    assert not generation(log, keep + 1).exists()
    for path in generations:
        # Rotated at the bound, not before, and not much after (one look's worth of output).
        assert bound <= path.stat().st_size < 2 * bound, (path, path.stat().st_size)
    live = log.read_bytes()
    assert b"\0" not in live, "the service wrote past a hole: not appending"
    assert live.startswith(b"==== ") or live.startswith(b"line ")
    lines = [n for path in [*reversed(generations), log] for n in numbers(path.read_text())]
    assert lines == sorted(set(lines)), "lines out of order or repeated across generations"
    # Copy-then-truncate loses at most a write landing in the instant between them.
    assert lines[-1] - lines[0] + 1 - len(lines) <= keep + 2
    assert "log rotated at 8192 bytes" in log.read_text() or any(
        "log rotated" in path.read_text() for path in generations
    )


def test_rotation_below_the_bound_and_without_generations(tmp_path: Path) -> None:
    """Below the bound nothing moves; ``keep`` 0 only truncates; a missing log is no error;
    nonsense bounds are refused."""
    log = tmp_path / "service.log"
    rotation = LogRotation(100, 2)
    assert not rotation.rotate(log)
    log.write_bytes(b"a" * 99)
    assert not rotation.rotate(log) and log.stat().st_size == 99
    log.write_bytes(b"b" * 100)
    assert rotation.rotate(log)
    assert log.stat().st_size == 0 and generation(log, 1).read_bytes() == b"b" * 100
    log.write_bytes(b"c" * 150)
    assert LogRotation(100, 0).rotate(log)
    assert log.stat().st_size == 0 and generation(log, 1).read_bytes() == b"b" * 100
    assert not generation(log, 2).exists()
    with pytest.raises(ValueError, match="at least 1 byte"):
        LogRotation(0, 2)
    with pytest.raises(ValueError, match="0 or more"):
        LogRotation(10, -1)
    assert logrotate.rotate_all(None, [log]) == []


def test_make_run_reads_the_rotation_settings() -> None:
    """make run's defaults are 10 MiB and 5 generations; the settings change them; a wrong
    value stops the stack before it starts, naming both settings."""
    assert stack.log_rotation({}) == LogRotation(10 * 1024 * 1024, 5)
    assert stack.log_rotation(
        {"AX3L_STACK_LOG_MAX_MB": "0.5", "AX3L_STACK_LOG_KEEP": "2"}
    ) == LogRotation(524288, 2)
    for wrong in ({"AX3L_STACK_LOG_MAX_MB": "0"}, {"AX3L_STACK_LOG_KEEP": "1.5"}):
        with pytest.raises(SystemExit, match="AX3L_STACK_LOG_MAX_MB must be above 0"):
            stack.log_rotation(wrong)
    with pytest.raises(SystemExit, match="AX3L_STACK_LOG_KEEP must be a number"):
        stack.log_rotation({"AX3L_STACK_LOG_KEEP": "many"})
