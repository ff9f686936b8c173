"""Benchmark of ``ax3l-db adopt`` and ``ax3l-db upgrade`` on long histories (issue 26).

Adoption: the user's real SnakeLab export (``data/snakelab-runs.csv``) repeated to each size
(fresh run ids, seeds moved on by 3 per copy) in SnakeLab's tables of throwaway databases; the
figures are the planning read (``--dry-run``'s work), the adoption itself and the orchestrator's
start-up refusal check, in-process, and the whole ``ax3l-db adopt`` command (interpreter start
included) on a second pair.

Upgrade: release 1's tables (``ax3l.testing.release_1``) filled with ``--events`` events, each
with its message (about 300 bytes of JSON, like a comparison's), golden events with their
experiment_highscores rows, then ``ax3l-db upgrade`` timed as a command and as the revisions
alone; then one service start's schema check on the upgraded database, and for reference what
a revision that adds an index to ``events`` would cost at that size.

    uv run python bench/bench_adopt_migrate.py            # 300 and 30,000 runs, 1,000,000 events
    uv run python bench/bench_adopt_migrate.py --runs 300 --events 100000    # a quick run
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from ax3l.shared.config_schema import load_schema
from ax3l.shared.db import adopt
from ax3l.shared.db.cli import ensure_schema, upgrade_schema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.testing.big_history import fill_events
from ax3l.testing.databases import TestDatabases, private_db_env, run_module, scratch_databases
from ax3l.testing.release_1 import create_release_1
from ax3l.testing.snakelab_export import load_history

ROOT = Path(__file__).resolve().parents[1]


def cli(databases: TestDatabases, *args: str) -> tuple[float, str]:
    began = time.monotonic()
    env = {**databases.env(), "PATH": "/usr/bin:/bin"}
    done = run_module("ax3l.shared.db.cli", *args, env=env, timeout=None)
    if done.returncode != 0:
        raise SystemExit(f"ax3l-db {' '.join(args)} failed: {done.stderr}")
    return time.monotonic() - began, done.stdout


async def adopt_in_process(databases: TestDatabases) -> dict[str, float]:
    schema = load_schema()
    defaults = schema.flatten(schema.validate(schema.default_config()))
    async with Database(databases.settings()) as db:
        began = time.monotonic()
        await adopt.refusal(db, defaults)
        refusal = time.monotonic() - began
        began = time.monotonic()
        await adopt.plan(db, schema)
        planned = time.monotonic() - began
        began = time.monotonic()
        await adopt.adopt(db, schema, EventLog(db))
        adopted = time.monotonic() - began
    return {"refusal": refusal, "plan": planned, "adopt": adopted}


def bench_adoption(env: dict[str, str], sizes: list[int]) -> None:
    schema = load_schema()
    print("adoption (the user's export repeated; seconds)")
    print(f"{'runs':>8} {'load':>7} {'refusal':>8} {'plan':>7} {'adopt':>7} {'command':>8}")
    for size in sizes:
        with scratch_databases(env, prefix="ba", with_snakelab_tables=True) as dbs:
            began = time.monotonic()
            load_history(dbs, schema, runs=size)
            loaded = time.monotonic() - began
            timings = asyncio.run(adopt_in_process(dbs))
        with scratch_databases(env, prefix="bc", with_snakelab_tables=True) as dbs:
            load_history(dbs, schema, runs=size)
            command, _ = cli(dbs, "adopt")
        print(
            f"{size:>8} {loaded:>7.2f} {timings['refusal']:>8.3f} {timings['plan']:>7.3f}"
            f" {timings['adopt']:>7.3f} {command:>8.2f}"
        )


def fill_release_1(databases: TestDatabases, events: int) -> float:
    """``events`` events (``big_history``) in release 1's tables; returns the seconds it took."""
    began = time.monotonic()
    fill_events(databases, events, parameter=False)
    return time.monotonic() - began


def bench_upgrade(env: dict[str, str], events: int) -> None:
    with scratch_databases(env, prefix="bm") as dbs:
        create_release_1(dbs)
        filled = fill_release_1(dbs, events)
        print(f"\nupgrade of a release-1 database with {events:,} events", end="")
        print(f" (filled in {filled:.1f} s)")
        command, said = cli(dbs, "upgrade")
        print(f"  ax3l-db upgrade (command, interpreter start included): {command:.2f} s")
        print(f"  it said: {said.strip()}")
        began = time.monotonic()
        ensure_schema(dbs.settings())
        print(f"  a service start's schema check afterwards: {time.monotonic() - began:.3f} s")
        create_release_1(dbs)
        fill_release_1(dbs, events)
        began = time.monotonic()
        summary = upgrade_schema(dbs.settings())
        print(f"  in-process upgrade_schema: {time.monotonic() - began:.2f} s ({summary})")
        conn = dbs.connect("admin", dbs.ax3l_db)
        try:
            with conn.cursor() as cur:
                began = time.monotonic()
                cur.execute("CREATE INDEX bench_reference ON events (log_level, event_id)")
                indexed = time.monotonic() - began
                cur.execute("DROP INDEX bench_reference ON events")
        finally:
            conn.close()
        print(
            f"  for reference, a future revision adding an index to events: {indexed:.2f} s"
            " (0002 changes no table, so the upgrade above is mostly checks)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="300,30000", help="history sizes to adopt")
    parser.add_argument("--events", type=int, default=1_000_000, help="events to upgrade")
    args = parser.parse_args()
    env = private_db_env(ROOT)
    bench_adoption(env, [int(size) for size in args.runs.split(",") if size])
    if args.events:
        bench_upgrade(env, args.events)


if __name__ == "__main__":
    main()
