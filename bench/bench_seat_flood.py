"""A flood at the seats' endpoint (/mcp) while the experiment runs: what it costs the loop.

A real stack (reference SnakeLab with 0 s surrogate runs, broker, orchestrator with the
``external`` proposer; no seat answers, so every turn goes to ``tpe`` after
``--deadline`` seconds) is flooded over loopback, in turn, with

1. ``--count`` requests without a token (an MCP ``initialize`` POST), and
2. ``--count`` tool calls (``current_turn``) from a valid seat far beyond its
   ``AX3L_SEAT_RATE_LIMIT``,

``--concurrency`` at a time, each flood stopped after ``--max-seconds``. By default the
endpoint's request rates (``AX3L_SEATS_RATE_GLOBAL`` / ``_PER_ADDRESS``) are raised out of the
way so every request reaches the token check or the seat's limit, the costlier paths;
``--default-rates`` keeps them (most of the flood then gets 429 at the door). Printed:

* requests answered per second, by status;
* events written during each flood (all of them, and the seats' ``seat_call*``): the refused
  requests must write 0; the seat's admitted calls write at most one event per open turn;
* the loop's step time (between two ``configuration_compared``) p50/p95 during each flood
  against the same run without one (the goal: p95 within 20 %);
* the resident memory of the orchestrator and of the endpoint's process before and after.

The endpoint runs in its own process (``AX3L_SEATS_PROCESS``); ``--in-process`` serves it from
the orchestrator's event loop instead, for the comparison. The machine's load average is
printed too: on a shared machine the step times move with it.

    uv run python bench/bench_seat_flood.py [--count 20000] [--concurrency 50]
        [--max-seconds 180] [--deadline 0.3] [--baseline-steps 15] [--default-rates]
        [--in-process]

Uses the private MariaDB of scripts/mariadb.sh (started if needed) with throwaway databases.
Loopback only: the endpoint listens on 127.0.0.1 and the flood goes there.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2

from ax3l.testing.chaos import percentile
from ax3l.testing.databases import throwaway_databases
from ax3l.testing.mcp_wire import initialize
from ax3l.testing.plugin import free_port
from ax3l.testing.stack import Proc, Stack

REPO = Path(__file__).resolve().parents[1]
STEP = "configuration_compared"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def endpoint_pid(parent: int) -> int | None:
    """The orchestrator's child that is the seats' endpoint process, if any."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"ax3l.orchestrator.seat_process" in command:
            return int(stat.parent.name)
    return None


def memory(orchestrator: int, endpoint: int | None) -> str:
    text = f"orchestrator {rss_mib(orchestrator):.0f} MiB"
    return text + (f", endpoint {rss_mib(endpoint):.0f} MiB" if endpoint else "")


def step_times(stack: Stack, start: datetime, end: datetime) -> list[float]:
    """Seconds between consecutive steps completed within [start, end]."""
    with stack._cursor() as cur:
        cur.execute(
            "SELECT occurred_at FROM events WHERE name = %s AND occurred_at BETWEEN %s AND %s"
            " ORDER BY event_id",
            (STEP, start, end),
        )
        times = [row[0] for row in cur.fetchall()]
    return [(b - a).total_seconds() for a, b in itertools.pairwise(times)]


def event_counts(stack: Stack) -> tuple[int, int]:
    with stack._cursor() as cur:
        cur.execute("SELECT COUNT(*), COALESCE(SUM(name LIKE 'seat_call%%'), 0) FROM events")
        total, seats = cur.fetchone()
    return int(total), int(seats)


def db_now(stack: Stack) -> datetime:
    with stack._cursor() as cur:
        cur.execute("SELECT UTC_TIMESTAMP(6)")
        return datetime.fromisoformat(str(cur.fetchone()[0]))


async def flood(
    url: str, body: bytes, headers: dict[str, str], count: int, concurrency: int, limit: float
) -> tuple[Counter[int], float]:
    """``count`` POSTs of ``body``, ``concurrency`` connections at a time (HTTP/1.1 keep-alive),
    for at most ``limit`` seconds. A bare client (prebuilt request bytes, asyncio streams), so
    the flood's own CPU competes with the experiment as little as a loopback bench allows."""
    statuses: Counter[int] = Counter()
    sent = itertools.count()
    started = time.monotonic()
    host, port = url.split("//")[1].split("/")[0].split(":")
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\n{head}content-length: {len(body)}\r\n\r\n"
    ).encode() + body

    async def worker() -> None:
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        while next(sent) < count and time.monotonic() - started < limit:
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(host, int(port))
                assert reader is not None
                writer.write(request)
                status_line = await reader.readline()
                length, closing = 0, False
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                    elif name.lower() == "connection" and "close" in value.lower():
                        closing = True
                await reader.readexactly(length)
                statuses[int(status_line.split()[1])] += 1
                if closing:
                    writer.close()
                    writer = None
            except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
                statuses[0] += 1
                if writer is not None:
                    writer.close()
                writer = None
        if writer is not None:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return statuses, time.monotonic() - started


def wait_steps(stack: Stack, proc: Proc, steps: int) -> None:
    target = stack.count(STEP) + steps
    stack.wait_for(lambda: stack.count(STEP) >= target, 60 + 10 * steps, f"{steps} steps", proc)


def add_seat(stack: Stack, name: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ax3l.orchestrator.seats_cli", "add", name],
        env=stack.base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def metrics(url: str) -> dict[str, float]:
    text = httpx2.get(url.replace("/mcp", "/metrics"), timeout=10).text
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            values[key] = float(value)
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--max-seconds", type=float, default=180.0)
    parser.add_argument("--deadline", type=float, default=0.3)
    parser.add_argument("--baseline-steps", type=int, default=15)
    parser.add_argument("--default-rates", action="store_true")
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument(
        "--client-nice",
        type=int,
        default=19,
        help="niceness of the flood's client (a real flood's client is not on this machine)",
    )
    args = parser.parse_args()
    if not 1 <= args.count <= 100_000 or not 1 <= args.concurrency <= 200:
        parser.error("--count is 1..100000 and --concurrency 1..200")

    with throwaway_databases(REPO) as dbs, tempfile.TemporaryDirectory() as folder:
        stack = Stack(dbs, Path(folder))
        try:
            stack.start(surrogate_seconds=0)
            token = add_seat(stack, "flooder")
            port = free_port()
            url = f"http://127.0.0.1:{port}/mcp"
            env = {
                "AX3L_SEATS_HOST": "127.0.0.1",
                "AX3L_SEATS_PORT": str(port),
                "AX3L_EXTERNAL_DEADLINE": str(args.deadline),
                "AX3L_LLM_FALLBACK": "tpe",
                "AX3L_SEAT_RATE_LIMIT": "60",
                "AX3L_SEATS_MAX_CONNECTIONS": str(max(64, args.concurrency + 14)),
                "AX3L_SEATS_PROCESS": "false" if args.in_process else "true",
            }
            if not args.default_rates:
                env |= {"AX3L_SEATS_RATE_GLOBAL": "1e9", "AX3L_SEATS_RATE_PER_ADDRESS": "1e9"}
            proc = stack.orchestrator("external", env=env)
            wait_steps(stack, proc, 3)  # warmed up: seeding done, turns falling back
            pid = proc.pid
            endpoint = endpoint_pid(pid)
            memories = {"start": memory(pid, endpoint)}
            before = db_now(stack)
            wait_steps(stack, proc, args.baseline_steps)
            baseline = step_times(stack, before, db_now(stack))

            floods = {
                "no token": (json.dumps(initialize()).encode(), ACCEPT),
                "seat over its limit": (
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": 1,
                            "method": "tools/call",
                            "params": {"name": "current_turn", "arguments": {}},
                        }
                    ).encode(),
                    {**ACCEPT, "authorization": f"Bearer {token}"},
                ),
            }
            results: dict[str, dict[str, Any]] = {}
            os.nice(args.client_nice)  # the bench's own process sends the flood
            for name, (body, headers) in floods.items():
                events_before = event_counts(stack)
                counters_before = metrics(url)
                start = db_now(stack)
                statuses, seconds = asyncio.run(
                    flood(url, body, headers, args.count, args.concurrency, args.max_seconds)
                )
                end = db_now(stack)
                events_after = event_counts(stack)
                counters_after = metrics(url)
                memories[f"after {name}"] = memory(pid, endpoint)
                load = Path("/proc/loadavg").read_text().split()[0]
                refused = {
                    key.split('"')[1]: counters_after[key] - counters_before.get(key, 0)
                    for key in counters_after
                    if key.startswith("ax3l_seat_refused_total")
                }
                results[name] = {
                    "requests": sum(statuses.values()),
                    "seconds": seconds,
                    "statuses": dict(statuses),
                    "events": events_after[0] - events_before[0],
                    "seat_events": events_after[1] - events_before[1],
                    "steps_events": stack.count(STEP),
                    "steps": step_times(stack, start, end),
                    "refused": {k: v for k, v in refused.items() if v},
                    "load": load,
                }
            # The baseline again after the floods, pooled with the one before (a shared
            # machine's load drifts).
            after = db_now(stack)
            wait_steps(stack, proc, args.baseline_steps)
            baseline += step_times(stack, after, db_now(stack))
            alive = proc.alive()
            proc.stop()
        finally:
            stack.close()

    print(f"seats flood bench: {args.count} requests per flood, {args.concurrency} at a time,")
    print(
        f"  turn deadline {args.deadline} s (tpe falls back), endpoint rates"
        f" {'default' if args.default_rates else 'raised out of the way'}; loopback;"
        f" endpoint {'in the orchestrator' if args.in_process else 'in its own process'};"
        f" the flood's client at nice {args.client_nice}"
    )
    base_p50, base_p95 = statistics.median(baseline), percentile(baseline, 0.95)
    print(
        f"without flood (before and after): {len(baseline)} steps, step p50"
        f" {base_p50 * 1000:.0f} ms, p95 {base_p95 * 1000:.0f} ms"
    )
    for name, r in results.items():
        steps = r["steps"]
        print(f"flood '{name}':")
        print(
            f"  answered {r['requests']} in {r['seconds']:.1f} s ="
            f" {r['requests'] / r['seconds']:.0f} requests/s; statuses {r['statuses']}"
        )
        print(f"  refused (endpoint counters): {r['refused']}; load average {r['load']}")
        print(
            f"  events written during the flood: {r['events']} in all (the loop's own),"
            f" {r['seat_events']} seat_call*; refused requests: 0 written"
            if r["seat_events"] == 0 or name != "no token"
            else f"  events: {r['events']}, seat_call*: {r['seat_events']} (refused ones wrote!)"
        )
        if len(steps) >= 2:
            p50, p95 = statistics.median(steps), percentile(steps, 0.95)
            print(
                f"  loop during the flood: {len(steps)} steps, p50 {p50 * 1000:.0f} ms"
                f" ({(p50 / base_p50 - 1) * 100:+.0f} %), p95 {p95 * 1000:.0f} ms"
                f" ({(p95 / base_p95 - 1) * 100:+.0f} % against without)"
            )
        else:
            print(f"  loop during the flood: only {len(steps) + 1} step(s) completed")
    print("RSS: " + "; ".join(f"{k}: {v}" for k, v in memories.items()))
    print(f"orchestrator alive after the floods: {alive}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
