"""Benchmark: reference SnakeLab runs per second with the 0-second surrogate trainer.

End to end: a real ``python -m snakelab`` process (surrogate, SNAKELAB_SURROGATE_SECONDS=0)
on a scratch database of the private MariaDB; Ax3l's own client submits runs over the control
socket one after another, then polls ``simulation.status`` until the last one (FIFO) is
terminal. Every run writes its row, its 26 configuration columns, one ``simulation_episodes``
row per episode and its snapshot. The figure is runs / (last completion - first submit);
the database is checked afterwards (every run completed, every episode stored). For scale it
also prints the ceiling the database alone sets: the server's own episode writes of 1500-row
runs, back to back on one connection, with nothing else going on.

    uv run python bench/bench_snakelab_surrogate.py      # 200 runs at 1500 and at 500 epochs
    uv run python bench/bench_snakelab_surrogate.py --runs 1000 --epochs 1500
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from ax3l.shared.config_schema import load_schema
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.shared.testing.plugin import read_env_file
from snakelab.run_store import DbSettings, RunStore, utc_now
from snakelab.server_process import ScratchDatabase, SnakeLabProcess, scratch_snakelab_database

REPO = Path(__file__).resolve().parents[1]


def db_env() -> dict[str, str]:
    env_file = REPO / ".run" / "db.env"
    if not env_file.exists():
        subprocess.run([str(REPO / "scripts" / "mariadb.sh"), "start"], check=True)
    return read_env_file(env_file)


async def one_round(client: SnakeLabClient, runs: int, epochs: int, seed0: int) -> dict:
    submit_seconds: list[float] = []
    run_ids: list[str] = []
    start = time.perf_counter()
    for i in range(runs):
        before = time.perf_counter()
        reply = await client.submit({"epochs": epochs, "seed": seed0 + i})
        submit_seconds.append(time.perf_counter() - before)
        run_ids.append(reply.run_id)
    submitted = time.perf_counter()
    while True:
        status = await client.status(run_ids[-1])
        if status.terminal:
            break
        await asyncio.sleep(0.005)
    finished = time.perf_counter()
    return {
        "run_ids": run_ids,
        "seconds": finished - start,
        "submit_phase": submitted - start,
        "submit_p50_ms": statistics.median(submit_seconds) * 1000,
        "last_state": status.state,
    }


async def latency(client: SnakeLabClient, epochs: int, samples: int) -> float:
    """Median seconds from submit to a status saying completed (one run at a time)."""
    times = []
    for i in range(samples):
        start = time.perf_counter()
        run_id = (await client.submit({"epochs": epochs, "seed": 900_000 + i})).run_id
        while True:  # polling is the contract (no completion event to wait on)
            if (await client.status(run_id)).terminal:
                break
            await asyncio.sleep(0.001)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def check_database(database: ScratchDatabase, run_ids: list[str], epochs: int) -> str:
    conn = database.connect()
    try:
        with conn.cursor() as cur:
            marks = ",".join(["%s"] * len(run_ids))
            cur.execute(
                "SELECT COUNT(*), SUM(episode_count), SUM(high_score_snapshot IS NOT NULL)"
                f" FROM simulation_runs WHERE status = 'completed' AND run_id IN ({marks})",
                run_ids,
            )
            completed, episodes, snapshots = cur.fetchone()
            cur.execute(
                f"SELECT COUNT(*) FROM simulation_episodes WHERE run_id IN ({marks})", run_ids
            )
            (rows,) = cur.fetchone()
    finally:
        conn.close()
    expected = len(run_ids) * epochs
    ok = completed == len(run_ids) and rows == expected == episodes and snapshots == completed
    return (
        f"{'ok' if ok else 'MISMATCH'}: {completed}/{len(run_ids)} completed,"
        f" {rows}/{expected} episode rows, {snapshots} snapshots"
    )


def database_ceiling(database: ScratchDatabase, runs: int = 30, episodes: int = 1500) -> float:
    """Episode rows per second the database takes through the server's own write calls.

    Per run: the submit's insert, the start, and the end with all its episodes, back to back
    on one connection; this is all the database work of a 0-second run.
    """
    store = RunStore(
        DbSettings(database.host, database.port, database.user, database.password, database.name),
        "bench",
    )
    schema = load_schema()
    flat = schema.flatten(schema.fill_defaults({"epochs": episodes}))
    rows = [(e, e % 40, 200 + e, 0.96**e, 0.1 + e / 1e4) for e in range(1, episodes + 1)]
    try:
        store.create_tables()
        started = time.perf_counter()
        for _ in range(runs):
            run_id = str(uuid.uuid4())
            store.insert_run(run_id, "0" * 64, flat, utc_now())
            store.mark_running(run_id, utc_now())
            store.finish(run_id, "completed", rows, episodes, 39, utc_now(), None, {"version": 1})
        return runs * episodes / (time.perf_counter() - started)
    finally:
        store.close()


async def bench(args: argparse.Namespace) -> int:
    failures = 0
    with scratch_snakelab_database(db_env()) as database:
        ceiling = database_ceiling(database)
        print(
            f"database alone: {ceiling:,.0f} episode rows/s (= {ceiling / 1500:.0f} runs/s of"
            f" 1500 episodes, {ceiling / 500:.0f} of 500) through the server's write calls"
        )
        with SnakeLabProcess(database.env(), trainer="surrogate", seconds=0) as server:
            client = SnakeLabClient(server.endpoint, timeout=10.0)
            await one_round(client, 5, 500, 1)  # warm-up: imports, model load, connections
            for epochs in args.epochs:
                result = await one_round(client, args.runs, epochs, 10_000 * epochs)
                check = check_database(database, result["run_ids"], epochs)
                failures += not check.startswith("ok")
                rate = args.runs / result["seconds"]
                print(
                    f"surrogate 0 s, {epochs} episodes/run: {rate:.0f} runs/s"
                    f" ({rate * epochs:,.0f} episode rows/s);"
                    f" {args.runs} runs in {result['seconds']:.2f} s"
                    f" (submitting took {result['submit_phase']:.2f} s,"
                    f" submit p50 {result['submit_p50_ms']:.1f} ms); db {check}"
                )
                single = await latency(client, epochs, args.latency_samples)
                print(
                    f"  one run alone, submit to status completed: {single * 1000:.1f} ms (median)"
                )
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per measurement (200)")
    parser.add_argument(
        "--epochs",
        type=int,
        nargs="+",
        default=[1500, 500],
        help="episodes per run to measure (1500 = the default config, 500 = the minimum)",
    )
    parser.add_argument("--latency-samples", type=int, default=10)
    return asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
