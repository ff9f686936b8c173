"""Orchestrator benchmarks: loop overhead per step, and how busy the simulator is kept.

1. Overhead: an instant scripted model and 0 s surrogate runs, so a step's wall time is all
   orchestration (checkpoint, history reads, MCP session, model request, broker, waiting,
   comparison). Reports p50/p95 per step, how long conversations waited for their MCP session,
   and the ratio of the step to one MCP child spawn measured in the same run (``--ahead``: the
   values of AX3L_MCP_PREPARED_AHEAD compared; 0 spawns each session when its conversation
   starts, as before the session pool; ``--spawn``: the values of AX3L_MCP_SPAWN compared, the
   children forked from a zygote or each a new interpreter).
2. Simulator busy fraction: a scripted model that thinks ``--think`` seconds and surrogate runs
   of ``--run`` seconds (the real system: about 30 s and 300 s; the issue asks for 30 s and
   60 s). The defaults are scaled down (3 s / 6 s) so the bench takes a couple of minutes; the
   ideal for a strictly sequential loop is run / (run + think + overhead).

    uv run python bench/bench_orchestrator.py [--steps 14] [--think 3] [--run 6] [--busy-steps 6]
                                              [--ahead 0,1] [--spawn fork,exec] [--pipeline off,on]
    uv run python bench/bench_orchestrator.py --think 30 --run 60 --busy-steps 6   # full size

Uses the private MariaDB of scripts/mariadb.sh (started if needed) with throwaway databases.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ax3l.orchestrator.mcp_session import bound_session
from ax3l.shared.registry import ENTRIES
from ax3l.shared.settings import Settings
from ax3l.testing.chaos import percentile
from ax3l.testing.databases import throwaway_databases
from ax3l.testing.stack import Stack, check_history

REPO = Path(__file__).resolve().parents[1]
RANGES = {
    "hidden_size": [[64, 384, 16]],
    "sequence_length": [[4, 48, 4]],
    "batch_size": [[8, 64, 2]],
    "learning_rate": [[0.0005, 0.005]],
    "gamma": [[0.9, 0.99]],
    "epsilon_pair": [[0.85, 0.999], [0.9, 0.999]],
    "reward_pair": [[0, 6, 1], [-6, 0, 1]],
}
STEP_EVENTS = ("configuration_compared", "parameter_space_exhausted")


def occurred(stack: Stack) -> dict[int, datetime]:
    with stack._cursor() as cur:
        cur.execute("SELECT event_id, occurred_at FROM events")
        return {int(row[0]): row[1] for row in cur.fetchall()}


def run_intervals(stack: Stack) -> list[tuple[datetime, datetime]]:
    """SnakeLab's (started_at, completed_at) of every finished run, in order."""
    with stack._cursor() as cur:
        cur.execute(
            f"SELECT started_at, completed_at FROM `{stack.databases.snakelab_db}`.simulation_runs"
            " WHERE started_at IS NOT NULL AND completed_at IS NOT NULL ORDER BY id"
        )
        return [(row[0], row[1]) for row in cur.fetchall()]


async def _spawns(endpoint: str, count: int, spawn: str) -> list[float]:
    """Seconds to start, initialise and list the tools of one bound MCP child, ``count`` times
    (``spawn``: AX3L_MCP_SPAWN; a forked child's first start includes its zygote's)."""
    settings = Settings(AX3L_ZMQ_ENDPOINT=endpoint, AX3L_MCP_SPAWN=spawn)
    seconds = []
    for number in range(count):
        async with bound_session(ENTRIES[number % len(ENTRIES)], settings) as session:
            seconds.append(session.spawn_seconds)
    return seconds


def spawn_seconds(stack: Stack, spawn: str = "exec", count: int = 5) -> float:
    """The median start of one MCP child, measured now (same machine, same load): ``exec``, a
    new interpreter, is the unit the overhead is measured in."""
    endpoint = stack.base_env()["AX3L_ZMQ_ENDPOINT"]
    return statistics.median(asyncio.run(_spawns(endpoint, count, spawn)))


def overhead(steps: int, ahead: int, spawn: str) -> dict[str, Any]:
    """Per-step orchestration time with an instant model and 0 s runs."""
    with throwaway_databases(REPO) as dbs, tempfile.TemporaryDirectory() as folder:
        stack = Stack(dbs, Path(folder))
        try:
            stack.start(surrogate_seconds=0)
            model = stack.start_model({"then": {"random_call": RANGES}})
            proc = stack.orchestrator(
                "llm",
                url=model.url,
                env={
                    "AX3L_POLL_INTERVAL": "0.05",
                    "AX3L_MCP_PREPARED_AHEAD": str(ahead),
                    "AX3L_MCP_SPAWN": spawn,
                },
            )
            stack.wait_for(
                lambda: stack.count(*STEP_EVENTS) >= steps + 1,
                60 + 10 * steps,
                f"{steps + 1} steps",
                proc,
            )
            proc.stop()
            exec_spawn = spawn_seconds(stack, "exec")
            fork_spawn = spawn_seconds(stack, "fork", count=6)
            check_history(stack)
            times = occurred(stack)
            completions = stack.events(*STEP_EVENTS)[: steps + 1]
            runs = run_intervals(stack)
            sim_seconds = sum((end - start).total_seconds() for start, end in runs[1:])
            durations = [
                (times[b.event_id] - times[a.event_id]).total_seconds()
                for a, b in itertools.pairwise(completions)
            ]
            ended = [
                e for e in stack.events("conversation_ended") if e.get("outcome") == "accepted"
            ]
            sessions = [s for e in ended[1 : steps + 1] for s in e.get("mcp_sessions", [])]
            waits = [s.get("wait_seconds", s["spawn_seconds"]) for s in sessions]
            total = sum(durations)
            return {
                "ahead": ahead,
                "mode": spawn,
                "steps": len(durations),
                "p50": statistics.median(durations),
                "p95": percentile(durations, 0.95),
                "mean": total / len(durations),
                "spawn": exec_spawn,
                "fork_spawn": fork_spawn,
                "wait_p50": statistics.median(waits),
                "wait_p95": percentile(waits, 0.95),
                "wait_share": sum(waits) / total,
                "prepared": sum(1 for s in sessions if s.get("prepared")) / max(1, len(sessions)),
                "sim_share": sim_seconds / total,
                "requests": len(model.requests()),
            }
        finally:
            stack.close()


def busy_fraction(
    think: float,
    run: float,
    steps: int,
    ahead: int,
    pipeline: bool = False,
    url: str | None = None,
) -> dict[str, Any]:
    """How much of the wall time SnakeLab spends running simulations."""
    with throwaway_databases(REPO) as dbs, tempfile.TemporaryDirectory() as folder:
        stack = Stack(dbs, Path(folder))
        try:
            stack.start(surrogate_seconds=run)
            if url is None:
                url = stack.start_model({"then": {"random_call": RANGES, "delay": think}}).url
            proc = stack.orchestrator(
                "llm",
                url=url,
                env={
                    "AX3L_POLL_INTERVAL": "0.5",
                    "AX3L_LLM_TIMEOUT": str(think * 4 + 30),
                    "AX3L_MCP_PREPARED_AHEAD": str(ahead),
                    "AX3L_PIPELINE": "on" if pipeline else "off",
                },
            )
            stack.wait_for(
                lambda: stack.count(*STEP_EVENTS) >= steps,
                60 + steps * (run + think) * 3,
                f"{steps} steps",
                proc,
            )
            proc.stop()
            runs = run_intervals(stack)[1 : steps + 1]  # without the seeding run
            # Steady state: each run plus the idle gap before the next one is one period.
            period = (runs[-1][0] - runs[0][0]).total_seconds() / (len(runs) - 1)
            durations = [(end - start).total_seconds() for start, end in runs[:-1]]
            gaps = [(b[0] - a[1]).total_seconds() for a, b in itertools.pairwise(runs)]
            ended = [
                e for e in stack.events("conversation_ended") if e.get("outcome") == "accepted"
            ]
            sessions = [s for e in ended[1:steps] for s in e.get("mcp_sessions", [])]
            waits = [s.get("wait_seconds", s["spawn_seconds"]) for s in sessions] or [0.0]
            spawns = [s["spawn_seconds"] for s in sessions] or [0.0]
            return {
                "wait_p50": statistics.median(waits),
                "wait_p95": percentile(waits, 0.95),
                "spawn_p50": statistics.median(spawns),
                "runs": len(runs),
                "period": period,
                "busy": statistics.mean(durations) / period,
                "ideal": run / (run + think),
                "gap_p50": statistics.median(gaps),
                "gap_p95": percentile(gaps, 0.95),
                "gap_overhead": statistics.median(gaps) - think,
                "pipelined": stack.count("conversation_resumed"),
            }
        finally:
            stack.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=14, help="steps measured for the overhead")
    parser.add_argument("--think", type=float, default=3.0, help="model thinking seconds")
    parser.add_argument("--run", type=float, default=6.0, help="surrogate run seconds")
    parser.add_argument("--busy-steps", type=int, default=6, help="runs measured for busy time")
    parser.add_argument("--skip-busy", action="store_true", help="only the overhead part")
    parser.add_argument("--skip-overhead", action="store_true", help="only the busy part")
    parser.add_argument(
        "--ahead", default="0,1", help="AX3L_MCP_PREPARED_AHEAD values to compare (comma list)"
    )
    parser.add_argument(
        "--spawn", default="fork", help="AX3L_MCP_SPAWN values for the overhead (comma list)"
    )
    parser.add_argument(
        "--pipeline",
        default="off",
        help="AX3L_PIPELINE values to compare in the busy part (comma list: off,on)",
    )
    parser.add_argument(
        "--url",
        help="a real model server (llama-server) for the busy part instead of the scripted"
        " model; the gaps are then seconds from a run's completion to the next run's start",
    )
    args = parser.parse_args(argv)
    aheads = [int(value) for value in args.ahead.split(",")]
    pipelines = [value.strip() == "on" for value in args.pipeline.split(",")]

    began = time.monotonic()
    spawns = args.spawn.split(",")
    for spawn, ahead in itertools.product([] if args.skip_overhead else spawns, aheads):
        result = overhead(args.steps, ahead, spawn)
        print(
            f"orchestrator overhead per step (instant model, 0 s runs, {result['steps']} steps,"
            f" AX3L_MCP_PREPARED_AHEAD={ahead}, AX3L_MCP_SPAWN={spawn}):"
        )
        print(
            f"  p50 {result['p50']:.3f} s   p95 {result['p95']:.3f} s   mean {result['mean']:.3f} s"
        )
        print(
            f"  one MCP child spawn (a new interpreter, median of 5, same run):"
            f" {result['spawn']:.3f} s; step / spawn: p50 {result['p50'] / result['spawn']:.2f},"
            f" p95 {result['p95'] / result['spawn']:.2f}"
        )
        print(f"  one forked MCP child (median of 6, same run): {result['fork_spawn']:.3f} s")
        print(
            f"  conversations waited for their MCP session: p50 {result['wait_p50']:.3f} s,"
            f" p95 {result['wait_p95']:.3f} s ({result['wait_share']:.0%} of step time;"
            f" {result['prepared']:.0%} of sessions prepared in advance)"
        )
        print(f"  simulation time inside the steps: {result['sim_share']:.1%}")
    for ahead, pipeline in itertools.product([] if args.skip_busy else aheads, pipelines):
        busy = busy_fraction(args.think, args.run, args.busy_steps, ahead, pipeline, args.url)
        model = f"model at {args.url}" if args.url else f"model {args.think:g} s"
        print(
            f"simulator busy fraction ({model}, runs {args.run:g} s,"
            f" {busy['runs']} runs, one run every {busy['period']:.2f} s,"
            f" AX3L_MCP_PREPARED_AHEAD={ahead}, AX3L_PIPELINE={'on' if pipeline else 'off'}):"
        )
        gap = (
            f" idle gap between runs (completion to the next start) p50 {busy['gap_p50']:.2f} s,"
            f" p95 {busy['gap_p95']:.2f} s"
        )
        if pipeline or args.url:
            print(
                f"  busy {busy['busy']:.1%}  (ideal for a sequential loop {busy['ideal']:.1%});"
                f"{gap}; {busy['pipelined']} conversations pipelined"
            )
        else:
            print(
                f"  busy {busy['busy']:.1%}  (ideal for a sequential loop {busy['ideal']:.1%});"
                f"{gap} = thinking {args.think:g} s + {busy['gap_overhead']:.2f} s overhead"
            )
        print(
            f"  conversations waited for their MCP session: p50 {busy['wait_p50']:.3f} s,"
            f" p95 {busy['wait_p95']:.3f} s (a spawn took {busy['spawn_p50']:.3f} s)"
        )
    print(f"bench took {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
