"""Soak: thousands of steps in one go, to see that nothing grows with the history.

0 s surrogate runs and an instant scripted model (random proposals through the real MCP tool),
so each step is all orchestration. Every ``--window`` steps it prints the step time p50/p95 (from
the completed steps' event times), the resident memory (VmRSS) and CPU per step (user + system,
which a busy machine does not inflate the way it does wall time) of the orchestrator, the broker
and SnakeLab, and the prompt size (characters of the window's ``prompt_sent`` events, and per
conversation). At the end it compares the last window with the first and checks the history's
invariants (``ax3l.testing.invariants.check_invariants``). The services' logs are rotated as
``make run``'s supervisor rotates them (``--log-max-mb``, 5 kept) and their size on disk is
printed at the end, with what one step adds to each.

    uv run python bench/bench_soak.py                 # 5,000 steps
    uv run python bench/bench_soak.py --steps 1000    # a shorter soak

Runs on a MariaDB of its own (``scripts/mariadb.sh`` in a temporary run directory on a free
port, deleted afterwards), so the private MariaDB under ``.run`` is untouched.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ax3l.shared.db.cli import ensure_schema
from ax3l.shared.logrotate import LogRotation, rotate_all
from ax3l.shared.stack.mariadb import PrivateMariaDB
from ax3l.testing import chaos
from ax3l.testing.chaos import percentile
from ax3l.testing.databases import TestDatabases
from ax3l.testing.invariants import check_invariants
from ax3l.testing.scripted_llm import random_call_ranges
from ax3l.testing.stack import Stack

REPO = Path(__file__).resolve().parents[1]
STEP_EVENTS = chaos.STEP_EVENTS


@dataclass
class Window:
    """The figures of one window of steps."""

    last_step: int
    wall: float
    step_p50: float
    step_p95: float
    rss_mb: dict[str, float]
    cpu_ms: dict[str, float]  # CPU (user + system) per step in the window, load-independent
    prompt_mean: float
    prompt_max: int
    conversation_chars: float
    events: int

    def line(self) -> str:
        rss = "  ".join(f"{name} {mb:6.1f} MB" for name, mb in self.rss_mb.items())
        cpu = "  ".join(f"{name} {ms:5.0f}" for name, ms in self.cpu_ms.items())
        return (
            f"steps {self.last_step:5d} ({self.wall:6.0f} s): step p50 {self.step_p50:.3f} s"
            f" p95 {self.step_p95:.3f} s | RSS {rss} | CPU ms/step {cpu}"
            f" | prompt_sent mean {self.prompt_mean:6.0f}"
            f" max {self.prompt_max:6d} chars, per conversation {self.conversation_chars:6.0f}"
            f" | events {self.events}"
        )


def rss_mb(pid: int | None) -> float:
    """VmRSS of ``pid`` in MB (nan when it is gone)."""
    if pid is None:
        return float("nan")
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds ``pid`` and its ended children (the orchestrator's MCP
    sessions) have used (nan when it is gone)."""
    if pid is None:
        return float("nan")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class Reader:
    """Incremental reads of the step events and the prompt sizes."""

    def __init__(self, stack: Stack):
        self.stack = stack
        self.last_id = 0
        self.steps: list[tuple[int, Any]] = []  # (event_id, occurred_at)

    def poll(self) -> int:
        with self.stack._cursor() as cur:
            cur.execute(
                "SELECT event_id, occurred_at FROM events WHERE name IN (%s, %s)"
                " AND event_id > %s ORDER BY event_id",
                (*STEP_EVENTS, self.last_id),
            )
            rows = cur.fetchall()
        for event_id, occurred_at in rows:
            self.steps.append((int(event_id), occurred_at))
            self.last_id = int(event_id)
        return len(self.steps)

    def prompts(self, first_id: int, last_id: int) -> tuple[float, int, float]:
        with self.stack._cursor() as cur:
            cur.execute(
                "SELECT e.process_id, CHAR_LENGTH(m.content) FROM events e"
                " JOIN event_messages m ON m.event_id = e.event_id"
                " WHERE e.name = 'prompt_sent' AND e.event_id > %s AND e.event_id <= %s",
                (first_id, last_id),
            )
            rows = cur.fetchall()
        if not rows:
            return 0.0, 0, 0.0
        sizes = [int(size) for _, size in rows]
        per_conversation: dict[Any, int] = {}
        for process_id, size in rows:
            per_conversation[process_id] = per_conversation.get(process_id, 0) + int(size)
        return statistics.mean(sizes), max(sizes), statistics.mean(per_conversation.values())

    def event_count(self) -> int:
        with self.stack._cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM events")
            return int(cur.fetchone()[0])


def measure_window(
    reader: Reader,
    stack: Stack,
    orchestrator: Any,
    start: int,
    end: int,
    began: float,
    cpu_before: dict[str, float],
) -> Window:
    steps = reader.steps[start:end]
    before = reader.steps[start - 1] if start > 0 else steps[0]
    times = [before[1], *(at for _, at in steps)] if start > 0 else [at for _, at in steps]
    durations = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    prompt_mean, prompt_max, per_conversation = reader.prompts(before[0], steps[-1][0])
    assert stack.broker is not None and stack.snakelab is not None
    snakelab_pid = stack.snakelab.process.pid if stack.snakelab.process else None
    pids = {
        "orchestrator": orchestrator.popen.pid,
        "broker": stack.broker.popen.pid,
        "snakelab": snakelab_pid,
    }
    cpu_now = {name: cpu_seconds(pid) for name, pid in pids.items()}
    cpu_ms = {
        name: (cpu_now[name] - cpu_before.get(name, 0.0)) * 1000 / len(steps) for name in pids
    }
    cpu_before.update(cpu_now)
    return Window(
        last_step=end,
        wall=time.monotonic() - began,
        step_p50=statistics.median(durations),
        step_p95=percentile(durations, 0.95),
        rss_mb={name: rss_mb(pid) for name, pid in pids.items()},
        cpu_ms=cpu_ms,
        prompt_mean=prompt_mean,
        prompt_max=prompt_max,
        conversation_chars=per_conversation,
        events=reader.event_count(),
    )


def verdict(first: Window, last: Window) -> list[str]:
    """What grew between the first and the last window (empty: flat)."""
    grew = []
    if last.step_p50 > first.step_p50 * 1.5 + 0.02:
        grew.append(f"step p50 {first.step_p50:.3f} -> {last.step_p50:.3f} s")
    for name in ("orchestrator", "broker"):
        a, b = first.rss_mb[name], last.rss_mb[name]
        if b > a * 1.25 + 10:
            grew.append(f"{name} RSS {a:.1f} -> {b:.1f} MB")
    if last.cpu_ms["orchestrator"] > first.cpu_ms["orchestrator"] * 1.5 + 20:
        grew.append(
            f"orchestrator CPU per step {first.cpu_ms['orchestrator']:.0f} ->"
            f" {last.cpu_ms['orchestrator']:.0f} ms"
        )
    if last.conversation_chars > first.conversation_chars * 1.5 + 500:
        grew.append(
            f"prompt chars per conversation {first.conversation_chars:.0f} ->"
            f" {last.conversation_chars:.0f}"
        )
    return grew


def log_sizes(folder: Path, steps: int, rotation: LogRotation) -> str:
    """The logs' bytes on disk (generations included) and what one step adds to each."""
    sizes: dict[str, int] = {}
    for path in sorted(folder.glob("*.log*")):
        name = path.name.split(".log")[0] + ".log"
        sizes[name] = sizes.get(name, 0) + path.stat().st_size
    lines = [
        f"logs after {steps} steps with rotation at {rotation.max_bytes:,} bytes, {rotation.keep}"
        f" kept: {sum(sizes.values()):,} bytes on disk"
    ]
    for name, size in sorted(sizes.items(), key=lambda item: -item[1]):
        if (folder / f"{name}.{rotation.keep}").exists():  # generations dropped: no rate
            lines.append(f"  {name}: {size:,} bytes (every generation in use: bounded)")
        else:
            lines.append(f"  {name}: {size:,} bytes, {size / max(steps, 1):,.0f} a step")
    return "\n".join(lines)


def soak(
    steps: int, window: int, stagnant_rounds: int | None, rotation: LogRotation | None = None
) -> int:
    mariadb = PrivateMariaDB(REPO)
    began = time.monotonic()
    try:
        mariadb.start()
        databases = TestDatabases.of_server(mariadb.settings())
        ensure_schema(databases.settings())
        with tempfile.TemporaryDirectory(prefix="ax3l-soak-") as folder:
            stack = Stack(databases, Path(folder))
            try:
                stack.start(surrogate_seconds=0)
                model = stack.start_model({"then": {"random_call": random_call_ranges()}})
                env = {"AX3L_POLL_INTERVAL": "0.05"}
                if stagnant_rounds is not None:
                    env["AX3L_SEED_STAGNANT_ROUNDS"] = str(stagnant_rounds)
                orchestrator = stack.orchestrator("llm", url=model.url, env=env)
                reader = Reader(stack)
                windows: list[Window] = []
                cpu_before: dict[str, float] = {}
                print(
                    f"soak: {steps} steps, a line every {window}; 0 s surrogate runs,"
                    " instant scripted model",
                    flush=True,
                )
                last_progress = time.monotonic()
                seen = 0
                while len(windows) * window < steps:
                    time.sleep(1.0)
                    rotate_all(rotation, list(Path(folder).glob("*.log")))
                    if not orchestrator.alive():
                        print(f"soak: the orchestrator exited:\n{orchestrator.log_tail()}")
                        return 1
                    count = reader.poll()
                    if count > seen:
                        seen, last_progress = count, time.monotonic()
                    elif time.monotonic() - last_progress > 120:
                        print(f"soak: no step for 120 s at {count}:\n{orchestrator.log_tail()}")
                        return 1
                    while count >= (len(windows) + 1) * window and len(windows) * window < steps:
                        start = len(windows) * window
                        result = measure_window(
                            reader, stack, orchestrator, start, start + window, began, cpu_before
                        )
                        windows.append(result)
                        print(result.line(), flush=True)
                orchestrator.stop()
                if stack.broker is not None:
                    stack.broker.stop()
                with chaos.admin_connection(databases) as conn:
                    invariants, counts = check_invariants(conn, databases.snakelab_db)
                if rotation is not None:
                    print(log_sizes(Path(folder), seen, rotation))
            finally:
                stack.close()
    finally:
        mariadb.destroy()
    print(
        f"history: {counts['completed_steps']} steps, {counts['snakelab_runs']} runs,"
        f" {counts['goldens']} goldens, {counts['seed_rotations']} seed rotations,"
        f" {counts['events']} events"
    )
    failed = [i for i in invariants if not i.passed]
    for invariant in invariants:
        print(
            f"  {'ok  ' if invariant.passed else 'FAIL'} {invariant.name}:"
            f" {invariant.checked} checked, {len(invariant.violations)} violated"
        )
        for violation in invariant.violations[:5]:
            print(f"         - {violation}")
    grew = verdict(windows[0], windows[-1]) if len(windows) > 1 else []
    print("flat: " + ("yes" if not grew else "NO, " + "; ".join(grew)))
    print(f"soak took {time.monotonic() - began:.0f} s")
    return 1 if failed or grew else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000, help="steps to run (default 5000)")
    parser.add_argument("--window", type=int, default=500, help="steps per printed line")
    parser.add_argument(
        "--stagnant-rounds",
        type=int,
        default=None,
        help="AX3L_SEED_STAGNANT_ROUNDS for the loop (default: the setting's own, 9)",
    )
    parser.add_argument(
        "--log-max-mb",
        type=float,
        default=10.0,
        help="rotate the services' logs at this size, 5 kept, as make run does (default 10;"
        " 0: no rotation); the logs' size on disk is printed at the end",
    )
    args = parser.parse_args(argv)
    rotation = None
    if args.log_max_mb > 0:
        rotation = LogRotation(max(1, round(args.log_max_mb * 1024 * 1024)), 5)
    return soak(args.steps, min(args.window, args.steps), args.stagnant_rounds, rotation)


if __name__ == "__main__":
    sys.exit(main())
