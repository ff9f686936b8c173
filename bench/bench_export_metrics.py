"""Benchmark of ``ax3l-db export --optuna`` and of a ``/metrics`` scrape over many runs.

Fills throwaway databases of the project's MariaDB with ``--runs`` SnakeLab runs (90 %
completed with a score, 10 % failed; tuned values drawn from the schema's ranges) and a
``proposal_accepted`` event per run, then prints:

* the export's wall time into a fresh SQLite study (all runs new), and a second export's (none
  new: it reads the study's run ids and the runs, and adds nothing);
* the p50/p95 of a scrape of the orchestrator's ``/metrics`` (the app in-process on the real
  database: the database ping and SnakeLab's runs by status are counted per scrape).

    uv run python bench/bench_export_metrics.py                 # 100,000 runs
    uv run python bench/bench_export_metrics.py --runs 10000    # a quick run
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from ax3l.orchestrator.status import LoopStatus
from ax3l.orchestrator.status_api import create_app
from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db.cli import connect
from ax3l.shared.db.database import Database
from ax3l.shared.db.export_optuna import TUNED_PATHS, export_optuna
from ax3l.shared.readiness import ServiceResources
from ax3l.shared.registry import ENTRIES
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.testing.databases import TestDatabases, private_db_env, scratch_databases
from ax3l.testing.histories import draw_values

ROOT = Path(__file__).resolve().parents[1]
BATCH = 5000


def fill(dbs: TestDatabases, runs: int, rng: random.Random) -> None:
    """``runs`` SnakeLab rows with configurations, and one proposal_accepted event each."""
    schema = cached_schema()
    base = schema.default_config()
    start = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=30)
    snakelab = dbs.connect("snakelab", dbs.snakelab_db)
    ax3l = dbs.connect("admin", dbs.ax3l_db)
    try:
        for first in range(0, runs, BATCH):
            run_rows, config_rows, events, messages = [], [], [], []
            for number in range(first, min(runs, first + BATCH)):
                entry = ENTRIES[number % len(ENTRIES)]
                config = schema.with_values(
                    base, dict(zip(entry.paths, draw_values(schema, entry, rng), strict=True))
                )
                config["seed"] = 1970 + number // 5000
                flat = schema.flatten(config)
                run_id = str(uuid.UUID(int=rng.getrandbits(128)))
                failed = rng.random() < 0.1
                began = start + timedelta(seconds=20 * number)
                text = json.dumps(config, sort_keys=True, separators=(",", ":"))
                run_rows.append(
                    (
                        run_id,
                        "2.1.0",
                        hashlib.sha256(text.encode()).hexdigest(),
                        "failed" if failed else "completed",
                        None if failed else rng.randrange(20, 60),
                        began,
                        began,
                        began + timedelta(seconds=15),
                    )
                )
                config_rows.append((run_id, *flat.values()))
                events.append((number + 1, began, "proposal_accepted", "Configuration", "INFO"))
                messages.append(
                    (
                        number + 1,
                        json.dumps({"parameter": entry.name, "run_id": run_id, "proposer": "tpe"}),
                    )
                )
            columns = ", ".join(schema.flatten(base))
            marks = ", ".join(["%s"] * (len(schema.flatten(base)) + 1))
            with snakelab.cursor() as cur:
                cur.executemany(
                    "INSERT INTO simulation_runs (run_id, project_version, config_hash, status,"
                    " high_score, created_at, started_at, completed_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    run_rows,
                )
                cur.executemany(
                    f"INSERT INTO configurations (run_id, {columns}) VALUES ({marks})", config_rows
                )
            with ax3l.cursor() as cur:
                cur.executemany(
                    "INSERT INTO events (event_id, occurred_at, name, category, log_level)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    events,
                )
                cur.executemany(
                    "INSERT INTO event_messages (event_id, content) VALUES (%s, %s)", messages
                )
    finally:
        snakelab.close()
        ax3l.close()


async def scrape_times(dbs: TestDatabases, scrapes: int) -> list[float]:
    """Seconds per ``/metrics`` scrape of the orchestrator's app on the real database."""
    async with Database(dbs.settings()) as db:
        status = LoopStatus("bench", "tpe")
        status.golden_high_score, status.seed = 50, 1970
        app = create_app(ServiceResources(db, SnakeLabClient("tcp://127.0.0.1:1", 1.0), status))
        transport = httpx.ASGITransport(app=app)
        times = []
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            for _ in range(scrapes):
                began = time.perf_counter()
                response = await client.get("/metrics")
                times.append(time.perf_counter() - began)
                assert response.status_code == 200 and "ax3l_snakelab_runs" in response.text
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--no-export", action="store_true", help="measure the scrape only")
    args = parser.parse_args()
    rng = random.Random(27)
    with scratch_databases(private_db_env(ROOT), "bx", with_snakelab_tables=True) as dbs:
        began = time.perf_counter()
        fill(dbs, args.runs, rng)
        print(f"filled {args.runs:,} runs in {time.perf_counter() - began:.1f} s")
        if not args.no_export:
            with tempfile.TemporaryDirectory() as folder:
                storage = f"sqlite:///{Path(folder) / 'study.db'}"
                first = export_optuna(dbs.settings(), storage, "bench", connect)
                print(f"export, all new:  {first.seconds:.1f} s ({first.text()})")
                second = export_optuna(dbs.settings(), storage, "bench", connect)
                print(f"export, none new: {second.seconds:.1f} s ({second.text()})")
                print(f"params per trial: {len(TUNED_PATHS)}")
        times = asyncio.run(scrape_times(dbs, args.scrapes))
        # The first scrape counts every run; later ones only those from the oldest open run.
        print(f"/metrics first scrape: {times[0] * 1000:.1f} ms")
        ms = sorted(t * 1000 for t in times[1:])
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        print(
            f"/metrics scrape: p50 {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms"
            f" over {len(ms)} later scrapes"
        )


if __name__ == "__main__":
    main()
