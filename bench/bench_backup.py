"""Benchmark of ``ax3l-db backup`` and ``ax3l-db restore`` on a long history (issue 26).

A throwaway database pair is filled with ``--events`` events, each with its message (about 300
bytes of JSON, like a comparison's) and a golden with its experiment_highscores row every
1000th, and SnakeLab's tables with ``--runs`` runs (the user's real export,
``data/snakelab-runs.csv``, repeated). Then ``ax3l-db backup`` runs as a command (interpreter
start included) and its dump is restored, again as a command, into a second, fresh pair; the
counts are compared. Figures: fill time, backup time and size, restore time, and the rates.

    uv run python bench/bench_backup.py                         # 1,000,000 events, 30,000 runs
    uv run python bench/bench_backup.py --events 100000 --runs 3000      # a quick run
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from ax3l.shared.config_schema import load_schema
from ax3l.shared.ports import free_port
from ax3l.testing.big_history import fill_events
from ax3l.testing.databases import (
    TestDatabases,
    compare_environment,
    private_db_env,
    run_module,
    scratch_databases,
)
from ax3l.testing.snakelab_export import load_history

ROOT = Path(__file__).resolve().parents[1]


def ax3l_db(databases: TestDatabases, env: dict[str, str], *args: str) -> float:
    """Run ``ax3l-db`` as a command on ``databases`` with the admin login; its seconds."""
    command_env = compare_environment(databases, env)
    command_env["AX3L_ORCHESTRATOR_PORT"] = str(free_port())
    command_env["AX3L_RUN_DIR"] = "/nonexistent"  # not the checkout's make run (restore)
    began = time.monotonic()
    done = run_module("ax3l.shared.db.cli", *args, env=command_env, timeout=None)
    seconds = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"ax3l-db {' '.join(args)} failed: {done.stderr}")
    print(f"  it said: {done.stdout.strip()}")
    return seconds


def counts(databases: TestDatabases) -> tuple[int, int, int]:
    (events,) = databases.query("SELECT COUNT(*) FROM events")[0]
    (messages,) = databases.query("SELECT COUNT(*) FROM event_messages")[0]
    (runs,) = databases.query(
        "SELECT COUNT(*) FROM simulation_runs", database=databases.snakelab_db
    )[0]
    return int(events), int(messages), int(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the history")
    parser.add_argument("--runs", type=int, default=30_000, help="SnakeLab runs")
    args = parser.parse_args()
    env = private_db_env(ROOT)
    folder = Path(tempfile.mkdtemp(prefix="ax3l-bench-backup-"))
    try:
        with (
            scratch_databases(env, prefix="bb", with_snakelab_tables=True) as source,
            scratch_databases(env, prefix="br") as target,
        ):
            began = time.monotonic()
            fill_events(source, args.events)
            load_history(source, load_schema(), runs=args.runs)
            filled = time.monotonic() - began
            before = counts(source)
            print(
                f"history: {before[0]:,} events, {before[1]:,} messages, {before[2]:,} SnakeLab"
                f" runs (filled in {filled:.1f} s)"
            )
            saved = folder / "backup"
            backup = ax3l_db(source, env, "backup", str(saved))
            size = (saved / "dump.sql").stat().st_size
            print(
                f"backup:  {backup:.1f} s (command, interpreter start included), dump"
                f" {size / 1e6:,.0f} MB, {before[0] / backup:,.0f} events/s"
            )
            restore = ax3l_db(target, env, "restore", str(saved))
            print(
                f"restore: {restore:.1f} s into a fresh pair, {before[0] / restore:,.0f} events/s"
            )
            after = counts(target)
            if after != before:
                raise SystemExit(f"restored counts {after} differ from the source's {before}")
            print("restored counts equal the source's")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
