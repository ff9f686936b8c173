"""Benchmark: reference SnakeLab runs per second with the 0-second surrogate trainer.

End to end: a real ``python -m snakelab`` process (surrogate, SNAKELAB_SURROGATE_SECONDS=0)
on a scratch database of the private MariaDB; Ax3l's own client submits runs over the control
socket one after another, then polls ``simulation.status`` until the last one (FIFO) is
terminal. Every run writes its row, its 26 configuration columns, one ``simulation_episodes``
row per episode and its snapshot. The figure is runs / (last completion - first submit);
the database is checked afterwards (every run completed, every episode stored), and the CPU
time each process spent per run is printed (MariaDB, the SnakeLab server, this client).

For scale it also prints what the database alone costs: the server's own writes of whole runs
back to back on one connection, and MariaDB's CPU time per episode row when InnoDB stores rows
the server generates itself (``INSERT ... SELECT FROM seq_1_to_N``: no client, no SQL text to
parse). That last figure is the floor no client can go below on this machine.

    uv run python bench/bench_snakelab_surrogate.py      # 200 runs at 1500 and at 500 epochs
    uv run python bench/bench_snakelab_surrogate.py --runs 1000 --epochs 1500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import zmq
import zmq.asyncio

from ax3l.shared.config_schema import load_schema
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.testing.databases import private_db_env
from ax3l.testing.snakelab_process import (
    ScratchDatabase,
    SnakeLabProcess,
    scratch_snakelab_database,
)
from snakelab.run_store import DbSettings, RunStore, utc_now

REPO = Path(__file__).resolve().parents[1]


def mariadb_pid() -> int | None:
    """The private MariaDB's process id (scripts/mariadb.sh), for its CPU time; None if unknown."""
    try:
        return int((REPO / ".run" / "mariadb" / "mysqld.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a process so far (0 when it cannot be read)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_round(
    client: SnakeLabClient, events_endpoint: str, runs: int, epochs: int, seed0: int
) -> dict:
    """Submit ``runs`` runs back to back; done when the last one's status says terminal.

    The end is awaited on SnakeLab's ``snake_lab.simulation.ended`` events rather than by
    polling, so the measurement does not load the server with status requests; one status
    request then confirms the last run over the control socket.
    """
    context = zmq.asyncio.Context.instance()
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"snake_lab.simulation.ended")
    monitor = sub.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    try:
        sub.connect(events_endpoint)
        await asyncio.wait_for(monitor.recv_multipart(), 10)
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
            _, body = await asyncio.wait_for(sub.recv_multipart(), 120)
            if json.loads(body)["run_id"] == run_ids[-1]:
                break
        status = await client.status(run_ids[-1])
        finished = time.perf_counter()
    finally:
        sub.disable_monitor()
        monitor.close(linger=0)
        sub.close(linger=0)
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


def innodb_floor(database: ScratchDatabase, runs: int = 40, episodes: int = 1500) -> float | None:
    """MariaDB CPU ms per episode row when InnoDB stores rows it generates (no parsing)."""
    pid = mariadb_pid()
    if pid is None:
        return None
    conn = database.connect()
    try:
        with conn.cursor() as cur:
            # Same columns, key, engine and collation (LIKE copies no foreign key).
            cur.execute("CREATE TABLE floor_episodes LIKE simulation_episodes")
            before = cpu_seconds(pid)
            for _ in range(runs):
                cur.execute(
                    "INSERT INTO floor_episodes SELECT %s, seq, MOD(seq, 40), 200 + seq,"
                    f" 0.96 / seq, 0.1 + seq / 1e4 FROM seq_1_to_{int(episodes)}",
                    (str(uuid.uuid4()),),
                )
            used = cpu_seconds(pid) - before
            cur.execute("DROP TABLE floor_episodes")
    finally:
        conn.close()
    return used / (runs * episodes) * 1000


async def bench(args: argparse.Namespace) -> int:
    failures = 0
    with scratch_snakelab_database(private_db_env(REPO)) as database:
        pid = mariadb_pid()
        before = cpu_seconds(pid)
        ceiling = database_ceiling(database)
        db_cpu_per_row = (cpu_seconds(pid) - before) / (30 * 1500) * 1000
        print(
            f"database alone: {ceiling:,.0f} episode rows/s (= {ceiling / 1500:.0f} runs/s of"
            f" 1500 episodes, {ceiling / 500:.0f} of 500) through the server's write calls;"
            f" MariaDB CPU {db_cpu_per_row * 1000:.1f} us per row"
        )
        floor = innodb_floor(database)
        if floor is not None:
            print(
                f"InnoDB floor: {floor * 1000:.1f} us of MariaDB CPU per row it generates itself"
                f" = {floor * 1500:.2f} ms per 1500-episode run: at most"
                f" {1 / (floor * 1.5):.0f} runs/s of 1500 episodes"
                f" ({1 / (floor * 0.5):.0f} of 500) with a whole core for MariaDB alone"
            )
        with SnakeLabProcess(database.env(), trainer="surrogate", seconds=0) as server:
            client = SnakeLabClient(server.endpoint, timeout=10.0)
            # Warm-up: imports, the surrogate model, connections.
            await one_round(client, server.events_endpoint, 5, 500, 1)
            for epochs in args.epochs:
                assert server.process is not None
                server_pid = server.process.pid
                cpu_before = (cpu_seconds(pid), cpu_seconds(server_pid), time.process_time())
                result = await one_round(
                    client, server.events_endpoint, args.runs, epochs, 10_000 * epochs
                )
                cpu_ms = [
                    (cpu_seconds(pid) - cpu_before[0]) * 1000 / args.runs,
                    (cpu_seconds(server_pid) - cpu_before[1]) * 1000 / args.runs,
                    (time.process_time() - cpu_before[2]) * 1000 / args.runs,
                ]
                check = check_database(database, result["run_ids"], epochs)
                failures += not check.startswith("ok") or result["last_state"] != "completed"
                rate = args.runs / result["seconds"]
                print(
                    f"surrogate 0 s, {epochs} episodes/run: {rate:.0f} runs/s"
                    f" ({rate * epochs:,.0f} episode rows/s);"
                    f" {args.runs} runs in {result['seconds']:.2f} s"
                    f" (submitting took {result['submit_phase']:.2f} s,"
                    f" submit p50 {result['submit_p50_ms']:.1f} ms); db {check}"
                )
                print(
                    f"  CPU per run: MariaDB {cpu_ms[0]:.2f} ms,"
                    f" SnakeLab server {cpu_ms[1]:.2f} ms,"
                    f" client {cpu_ms[2]:.2f} ms (sum {sum(cpu_ms):.2f} ms on {os.cpu_count()}"
                    " cores)"
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
