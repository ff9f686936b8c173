"""Benchmark of the toolbroker's duplicate and exhaustion checks, and of its throughput.

Fills a private SnakeLab database with synthetic runs shaped like a real experiment (each run
is a golden configuration with one entry changed; goldens improve now and then; seeds rotate),
builds Ax3l's config index, and prints p50/p99 latency of

* the duplicate check (``ConfigIndex.find_runs``: is this exact 26-column config stored?),
* the exhaustion check (``ConfigIndex.is_exhausted`` for the finite entries),
* for contrast, the spec's comparison done naively in SnakeLab's tables (a 26-column WHERE),

at each size, then starts ``ax3l-toolbroker`` as a subprocess and measures requests per second
for rejected duplicates through its real ZeroMQ socket (sequential REQ round trips, and
pipelined over one DEALER). Each check includes the index's "anything new?" refresh, as in
the broker. Targets: p99 at the largest size no more than twice the p99 at the smallest, and
under 10 ms.

    uv run python bench/bench_toolbroker.py                      # 2,000 and 200,000 runs
    uv run python bench/bench_toolbroker.py --sizes 2000,20000   # a quick run
    uv run python bench/bench_toolbroker.py --sizes 2000,200000,1000000 --samples 2000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import zmq
import zmq.asyncio

from ax3l.shared import registry
from ax3l.shared.config_schema import ConfigSchema, cached_schema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.event_models import GoldenConfigCreated, RoundRobinCheckpoint
from ax3l.shared.ports import free_port
from ax3l.shared.processes import ManagedProcess
from ax3l.shared.waiting import WaitTimeout, wait_until_async
from ax3l.testing.databases import (
    TestDatabases,
    admin_connection,
    private_db_env,
    scratch_databases,
)

ROOT = Path(__file__).resolve().parents[1]
BATCH = 5000
TARGET_P99_MS = 10.0


# -- synthetic experiment -----------------------------------------------------------------------


class Experiment:
    """Configs like a long experiment's: golden + one entry changed, goldens move, seeds rotate."""

    def __init__(self, schema: ConfigSchema, rng: random.Random):
        self.schema = schema
        self.rng = rng
        self.golden = schema.default_config()
        self.domains = {e.name: registry.domain(schema, e) for e in registry.ENTRIES}
        self.count = 0

    def _value(self, path: str) -> int | float:
        leaf = self.schema.by_path[path]
        choices = registry.leaf_domain(leaf)
        if choices is not None:
            choice = self.rng.choice(choices)
            return int(choice) if leaf.type == "integer" else float(choice)
        low, high = float(leaf.minimum or 0), float(leaf.maximum or 1)
        return round(self.rng.uniform(low, high), 5)

    def next_config(self) -> dict[str, Any]:
        self.count += 1
        if self.count % 700 == 0:
            self.golden = self.schema.with_values(self.golden, {"seed": self.golden["seed"] + 1})
            return self.golden
        item = self.rng.choice(registry.ENTRIES)
        changes = {path: self._value(path) for path in item.paths}
        config = self.schema.with_values(self.golden, changes)
        if self.rng.random() < 0.03:
            self.golden = config
        return config


def insert_runs(dbs: TestDatabases, configs: list[dict[str, Any]]) -> None:
    schema = cached_schema(None)
    columns = ", ".join(schema.columns)
    marks = ", ".join(["%s"] * (len(schema.columns) + 1))
    statuses = ["completed"] * 8 + ["failed", "cancelled"]
    conn = dbs.connect("snakelab", dbs.snakelab_db)
    try:
        with conn.cursor() as cur:
            for start in range(0, len(configs), BATCH):
                runs, rows = [], []
                now = datetime.now(UTC).replace(tzinfo=None)
                for config in configs[start : start + BATCH]:
                    run_id = str(uuid.uuid4())
                    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
                    runs.append(
                        (
                            run_id,
                            "2.1.0",
                            hashlib.sha256(text.encode()).hexdigest(),
                            random.choice(statuses),
                            now,
                        )
                    )
                    rows.append((run_id, *schema.flatten(config).values()))
                cur.executemany(
                    "INSERT INTO simulation_runs"
                    " (run_id, project_version, config_hash, status, created_at)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    runs,
                )
                cur.executemany(
                    f"INSERT INTO configurations (run_id, {columns}) VALUES ({marks})", rows
                )
    finally:
        conn.close()


# -- measuring ------------------------------------------------------------------------------------


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return p50 * 1000, p99 * 1000


def naive_duplicate_sql(db: Database, schema: ConfigSchema) -> str:
    where = " AND ".join(f"c.{column} = %s" for column in schema.columns)
    return (
        f"SELECT r.run_id FROM {db.sl('simulation_runs')} r"
        f" JOIN {db.sl('configurations')} c ON c.run_id = r.run_id WHERE {where}"
    )


@dataclass
class Setup:
    """One size: its own databases, index and the checks to time against it."""

    size: int
    dbs: TestDatabases
    db: Database
    index: ConfigIndex
    candidates: list[dict[str, Any]]
    goldens: list[tuple[registry.Entry, dict[str, Any]]]
    naive_sql: str


async def settle(env: dict[str, str], deadline_seconds: float = 30.0) -> None:
    """Wait (at most ``deadline_seconds``) until InnoDB has flushed most of the bulk load, so
    the checks are timed in the steady state an experiment runs in, not during flushing."""
    conn = admin_connection(env)
    try:
        with conn.cursor() as cur:

            def flushed() -> bool:
                cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_%'")
                pages = {name: value for name, value in cur.fetchall()}
                dirty = int(pages["Innodb_buffer_pool_pages_dirty"])
                return dirty < 0.05 * int(pages["Innodb_buffer_pool_pages_total"])

            with contextlib.suppress(WaitTimeout):  # timed as it is, then
                await wait_until_async(flushed, deadline_seconds, interval=0.5)
    finally:
        conn.close()


async def measure(setups: list[Setup], samples: int) -> dict[int, dict[str, tuple[float, float]]]:
    """Interleaved timing: sample i of every size runs back to back, so machine noise hits
    all sizes alike."""
    for setup in setups:  # warm-up, untimed
        for candidate in setup.candidates[:100]:
            await setup.index.find_runs(candidate)
        for item, golden in setup.goldens[:100]:
            await setup.index.is_exhausted(item, golden)
    times: dict[int, dict[str, list[float]]] = {s.size: {} for s in setups}

    async def clock(setup: Setup, name: str, call: Awaitable[Any]) -> None:
        start = time.perf_counter()
        await call
        times[setup.size].setdefault(name, []).append(time.perf_counter() - start)

    for i in range(samples):
        for setup in setups:
            await clock(
                setup, "duplicate check (index)", setup.index.find_runs(setup.candidates[i])
            )
        for setup in setups:
            item, golden = setup.goldens[i]
            await clock(setup, "exhaustion check (index)", setup.index.is_exhausted(item, golden))
    naive_samples = max(10, samples // 50)
    for i in range(naive_samples):
        for setup in setups:
            values = tuple(cached_schema(None).flatten(setup.candidates[i]).values())
            name = f"duplicate check, naive 26-column scan ({naive_samples} samples)"
            await clock(setup, name, setup.db.fetchall(setup.naive_sql, values))
    return {
        size: {name: percentiles(found) for name, found in by_name.items()}
        for size, by_name in times.items()
    }


# -- broker throughput ----------------------------------------------------------------------------


def envelope(value: int) -> bytes:
    return json.dumps(
        {
            "protocol_version": 1,
            "sender": "mcp-snakelab",
            "target": "snakelab",
            "method": "submit_single_value",
            "payload": {"parameter": "hidden_size", "value": value},
        }
    ).encode()


async def broker_throughput(dbs: TestDatabases, requests: int) -> dict[str, float]:
    """Golden = default config; every hidden_size value already stored; all requests are
    rejected duplicates that go through the index."""
    settings, snakelab_db = dbs.settings(), dbs.snakelab_db
    schema = cached_schema(None)
    golden = schema.with_values(schema.default_config(), {"seed": 999_999})
    choices = [int(v[0]) for v in registry.domain(schema, registry.entry("hidden_size")) or []]
    insert_runs(dbs, [schema.with_values(golden, {"model.hidden_size": v}) for v in choices])
    async with Database(settings) as db:
        seed = golden["seed"]
        created = GoldenConfigCreated(
            run_id="bench", config=golden, high_score=40, seed=seed, simulations=1, reason="bench"
        )
        await EventLog(db).log(created, highscore=HighscoreRow(1, 40, seed))
        # The broker handles proposals only for the live turn: open hidden_size's.
        checkpoint = RoundRobinCheckpoint(parameter_order=list(registry.PARAMETER_ORDER), index=0)
        await EventLog(db).log(checkpoint, parameter="hidden_size")
    values = [v for v in choices if v != golden["model"]["hidden_size"]]
    zmq_endpoint = f"tcp://127.0.0.1:{free_port()}"
    port = free_port()
    child_env = {
        **os.environ,
        "DB_HOST": settings.db_host,
        "DB_PORT": str(settings.db_port),
        "DB_USER": settings.db_user,
        "DB_PASSWORD": settings.db_password.get_secret_value(),
        "AX3L_DB_NAME": settings.db_name,
        "AX3L_SNAKELAB_DB_NAME": snakelab_db,
        "AX3L_SNAKELAB_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
    }
    process = ManagedProcess(
        "ax3l-toolbroker",
        [
            sys.executable,
            "-m",
            "ax3l.toolbroker",
            "--zmq-endpoint",
            zmq_endpoint,
            "--port",
            str(port),
            "--log-level",
            "WARNING",
        ],
        child_env,
        None,
    )
    context = zmq.asyncio.Context.instance()
    try:
        async with httpx.AsyncClient() as client:

            async def healthy() -> bool:
                with contextlib.suppress(httpx.TransportError):
                    return (await client.get(f"http://127.0.0.1:{port}/health")).status_code == 200
                return False

            await process.wait_ready_async(healthy, 30)

        async def one(value: int) -> None:
            sock = context.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(zmq_endpoint)
            try:
                await sock.send(envelope(value))
                reply = json.loads(await sock.recv())
                assert reply["payload"]["code"] == "duplicate_config", reply
            finally:
                sock.close(linger=0)

        start = time.perf_counter()
        for i in range(requests):
            await one(values[i % len(values)])
        sequential = requests / (time.perf_counter() - start)

        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(zmq_endpoint)
        window = asyncio.Semaphore(32)

        async def send() -> None:
            for i in range(requests):
                await window.acquire()
                await dealer.send_multipart([b"", envelope(values[i % len(values)])])

        async def receive() -> None:
            for _ in range(requests):
                _, raw = await dealer.recv_multipart()
                assert json.loads(raw)["payload"]["code"] == "duplicate_config"
                window.release()

        start = time.perf_counter()
        await asyncio.gather(send(), receive())
        pipelined = requests / (time.perf_counter() - start)
        dealer.close(linger=0)
    finally:
        process.stop(30)
    return {"sequential REQ": sequential, "pipelined DEALER": pipelined}


# -- main -----------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> int:
    env = private_db_env(ROOT)
    schema = cached_schema(None)
    rng = random.Random(1970)
    sizes = sorted(int(size) for size in args.sizes.split(","))
    experiment = Experiment(schema, rng)
    configs = [experiment.next_config() for _ in range(sizes[-1])]
    fresh_maker = Experiment(schema, random.Random(2024))
    fresh = [schema.with_values(fresh_maker.next_config(), {"seed": 10**6}) for _ in range(500)]
    finite = [e for e in registry.ENTRIES if registry.domain(schema, e) is not None]
    print(f"toolbroker bench: sizes {sizes}, {args.samples} samples per check")
    with contextlib.ExitStack() as stack:
        setups: list[Setup] = []
        for size in sizes:
            scratch = scratch_databases(env, "btb", with_snakelab_tables=True, keep=args.keep)
            dbs = stack.enter_context(scratch)
            settings = dbs.settings()
            start = time.perf_counter()
            insert_runs(dbs, configs[:size])
            loaded = time.perf_counter() - start
            db = await Database(settings).open()
            index = ConfigIndex(db, schema, batch_size=5000)
            start = time.perf_counter()
            indexed = await index.refresh()
            built = time.perf_counter() - start
            print(
                f"{size:>9,} stored runs: inserted in {loaded:.1f} s, indexed {indexed:,} in"
                f" {built:.1f} s ({indexed / built if built else 0:,.0f} runs/s)"
            )
            stored = configs[:size]
            setups.append(
                Setup(
                    size=size,
                    dbs=dbs,
                    db=db,
                    index=index,
                    candidates=[
                        rng.choice(stored) if i % 2 else rng.choice(fresh)
                        for i in range(args.samples + 100)
                    ],
                    goldens=[
                        (rng.choice(finite), rng.choice(stored)) for _ in range(args.samples + 100)
                    ],
                    naive_sql=naive_duplicate_sql(db, schema),
                )
            )
        await settle(env)
        try:
            results = await measure(setups, args.samples)
        finally:
            for setup in setups:
                await setup.db.close()
        for size in sizes:
            print(f"\n{size:>9,} stored runs")
            for name, (p50, p99) in results[size].items():
                print(f"  {name:<58} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms")
        small, large = sizes[0], sizes[-1]
        print()
        for name in ("duplicate check (index)", "exhaustion check (index)"):
            ratio = results[large][name][1] / results[small][name][1]
            ok = ratio <= 2.0 and results[large][name][1] < TARGET_P99_MS
            print(
                f"{name}: p99 {results[small][name][1]:.2f} ms at {small:,} ->"
                f" {results[large][name][1]:.2f} ms at {large:,} (x{ratio:.2f});"
                f" target <= x2 and < {TARGET_P99_MS:g} ms: {'met' if ok else 'MISSED'}"
            )
        if args.requests:
            rates = await broker_throughput(setups[-1].dbs, args.requests)
            print(f"\nbroker throughput, rejected duplicates at {large:,} stored runs:")
            for name, rate in rates.items():
                print(f"  {name:<20} {rate:8.0f} requests/s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,200000", help="stored-run counts to measure at")
    parser.add_argument("--samples", type=int, default=1000, help="checks timed per size")
    parser.add_argument(
        "--requests", type=int, default=1000, help="duplicate requests for the throughput (0: skip)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
