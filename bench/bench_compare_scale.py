"""``ax3l-compare --ray`` over 1, 2 and 3 simulated nodes (issue 25): the comparison's wall time,
repeats per minute, speed-up and placement; then, on paper, the full honest comparison
(``default,random,tpe,llm+tpe`` x 10 repeats x 50 runs, 5 held-out seeds) with 12-minute real
runs on 1, 10 and 40 GPU nodes, from the per-repeat overhead measured here.

A Ray cluster of this machine (``ray.cluster_utils.Cluster``: a head without CPU, everything on
127.0.0.1, dashboard off) gets worker nodes one at a time, each with one ``snakelab`` unit, so
a node runs one repeat at a time, as a GPU node runs one SnakeLab run at a time. After each
node joins, the same comparison runs with ``--ray-resource snakelab=1`` on the private MariaDB
(``.run/db.env``) on the 0 s surrogate, so a repeat's time is all overhead: the services'
start, the loop, the database, the re-tests' bookkeeping, Ray's scheduling. The same
comparison runs once more without Ray (``--parallel 1``) for the local executor's figures.

This machine has 2 cores: three nodes' repeats share them, so the speed-up is capped by the
cores, not by Ray. The paper estimate assumes each node runs one repeat at a time, each run
takes 12 minutes plus the overhead per run measured here, and Ray hands the tasks to free nodes
in the comparison's order; an ``llm+tpe`` repeat's model turns are not counted (the model server
answers while no run trains, on the user's GPU: a few seconds a turn, ``bench/bench_llm.py``).

    uv run python bench/bench_compare_scale.py          # Ray is installed into .run/venv-ray
    uv run python bench/bench_compare_scale.py --repeats 2 --budget 6 --nodes 1,2

Ray is the optional extra: without it the bench installs it into ``.run/venv-ray`` (as ``make
test-ray`` does) and runs itself there.
"""

from __future__ import annotations

import argparse
import heapq
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RAY_ENV = REPO / ".run" / "venv-ray"
LOCAL = "127.0.0.1"
REAL_RUN_MINUTES = 12.0  # the user's median real SnakeLab run (316 runs)
PAPER_ARMS = ("default", "random", "tpe", "llm+tpe")
PAPER_REPEATS = 10
PAPER_BUDGET = 50
PAPER_RETESTS = 5
PAPER_NODES = (1, 10, 40)


def _reexec_with_ray() -> int:
    """Install the extra into .run/venv-ray (uv's cache makes it quick) and run there."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}  # .venv's, not this one
    env.update({"UV_PROJECT_ENVIRONMENT": str(RAY_ENV), "AX3L_BENCH_REEXEC": "1"})
    sync = ["uv", "sync", "--frozen", "--all-packages", "--extra", "ray", "--quiet"]
    subprocess.run(sync, cwd=REPO, env=env, check=True)
    command = ["uv", "run", "--frozen", "--no-sync", "python", *sys.argv]
    return subprocess.run(command, cwd=REPO, env=env).returncode


@dataclass(frozen=True)
class Measured:
    label: str
    nodes: int | None  # None: the local executor
    comparison_id: int
    wall: float
    repeats: int
    placement: dict[str, int]  # node id -> repeats
    setup: list[float]  # per repeat: services started
    walls: list[float]  # per repeat: its runs (the control arm's one run included)
    tuning: list[float]  # per tuned repeat: its budget's runs
    retest: list[float]  # per repeat: its re-tests
    runs: int  # runs per tuned repeat (its budget)
    retest_runs: int  # re-test runs per repeat

    @property
    def per_minute(self) -> float:
        return 60.0 * self.repeats / self.wall


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--proposers", default="tpe,random", help="the control arm is added")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=int, default=10)
    parser.add_argument("--retest", type=int, default=2)
    parser.add_argument("--nodes", default="1,2,3", help="node counts, ascending")
    parser.add_argument("--db-env", type=Path, default=REPO / ".run" / "db.env")
    args = parser.parse_args()
    if importlib.util.find_spec("ray") is None:
        if os.environ.get("AX3L_BENCH_REEXEC"):
            print("bench_compare_scale: Ray is still missing after the sync", file=sys.stderr)
            return 1
        return _reexec_with_ray()
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every address 127.0.0.1
    from ray.cluster_utils import Cluster

    counts = sorted({int(n) for n in args.nodes.split(",") if n.strip()})
    argv = ["--db-env", str(args.db_env), "--proposers", args.proposers]
    argv += ["--repeats", str(args.repeats), "--budget", str(args.budget)]
    argv += ["--retest", str(args.retest)]
    print(f"comparison: {' '.join(argv[2:])} (0 s surrogate runs); {os.cpu_count()} cores")
    measured: list[Measured] = []
    began = time.monotonic()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "node_ip_address": LOCAL,
            "num_cpus": 0,
            "include_dashboard": False,
            "dashboard_host": LOCAL,
        },
    )
    try:
        print(f"Ray head up in {time.monotonic() - began:.1f} s at {cluster.address}", flush=True)
        for count in counts:
            while len(cluster.worker_nodes) < count:
                cluster.add_node(node_ip_address=LOCAL, num_cpus=1, resources={"snakelab": 1})
            cluster.wait_for_nodes()
            ray_argv = [*argv, "--ray", cluster.address, "--ray-resource", "snakelab=1"]
            found = _compare(ray_argv, f"Ray, {count} node(s)", count, args.db_env)
            if found is None:
                return 1
            measured.append(found)
    finally:
        cluster.shutdown()
    local = _compare([*argv, "--parallel", "1"], "local, --parallel 1", None, args.db_env)
    if local is None:
        return 1
    measured.append(local)
    _table(measured)
    _paper(measured)
    return 0


def _compare(argv: list[str], label: str, nodes: int | None, db_env: Path) -> Measured | None:
    command = [sys.executable, "-m", "ax3l.compare", *argv]
    began = time.monotonic()
    completed = subprocess.run(command, capture_output=True, text=True)
    wall = time.monotonic() - began
    if completed.returncode != 0:
        print(completed.stdout, completed.stderr, file=sys.stderr)
        return None
    comparison_id = int(completed.stdout.split()[1].rstrip(":"))
    print(f"{label}: comparison {comparison_id}, {wall:.1f} s (the whole ax3l-compare)")
    return _measured(label, nodes, comparison_id, db_env)


def _measured(label: str, nodes: int | None, comparison_id: int, db_env: Path) -> Measured:
    """The comparison's figures as stored: its wall time, each finished repeat's start-up,
    tuning and re-test seconds and its node."""
    import pymysql

    from ax3l.compare.settings import effective_env, load_settings
    from ax3l.shared.db.cli import login_arguments

    settings = load_settings(effective_env(db_env, os.environ))
    conn = pymysql.connect(**login_arguments(settings), database=settings.db_name)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT wall_seconds, budget, content FROM comparisons WHERE comparison_id = %s",
                (comparison_id,),
            )
            wall, budget, comparison = cur.fetchone()
            cur.execute(
                "SELECT proposer, wall_seconds, content FROM comparison_repeats"
                " WHERE comparison_id = %s AND state = 'finished'",
                (comparison_id,),
            )
            rows = cur.fetchall()
    finally:
        conn.close()
    placement: Counter[str] = Counter()
    setup, walls, tuning, retest = [], [], [], []
    for proposer, repeat_wall, text in rows:
        content = json.loads(text)
        placed = content.get("placement") or {}
        placement[str(placed.get("node_id") or "local")[:8]] += 1
        setup.append(float(content.get("setup_seconds", 0.0)))
        retest.append(float(content.get("retest_seconds", 0.0)))
        walls.append(float(repeat_wall))
        if proposer != "default":
            tuning.append(float(repeat_wall))
    return Measured(
        label,
        nodes,
        comparison_id,
        float(wall),
        len(rows),
        dict(placement),
        setup,
        walls,
        tuning,
        retest,
        int(budget),
        len(json.loads(comparison)["retest"]["seeds"]),
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _table(measured: list[Measured]) -> None:
    base = next((m for m in measured if m.nodes == 1), measured[0])
    print()
    print("measured (0 s surrogate runs: every second is overhead):")
    print(
        f"{'executor':<22} {'repeats':>7} {'wall s':>7} {'repeats/min':>11} {'speed-up':>8}"
        f"  placement (repeats per node)"
    )
    for m in measured:
        spread = ", ".join(f"{node} {n}" for node, n in sorted(m.placement.items()))
        print(
            f"{m.label:<22} {m.repeats:>7} {m.wall:>7.1f} {m.per_minute:>11.1f}"
            f" {base.wall / m.wall:>7.2f}x  {spread}"
        )
    print(
        "per repeat (mean over the comparisons): services started"
        f" {_mean([s for m in measured for s in m.setup]):.2f} s, tuning"
        f" {_mean([t for m in measured for t in m.tuning]):.2f} s for {base.runs} runs, re-tests"
        f" {_mean([r for m in measured for r in m.retest]):.2f} s for {base.retest_runs} seeds"
    )


def _overheads(measured: list[Measured]) -> tuple[float, float, float]:
    """(per repeat, per tuning run, per re-test run) seconds of overhead, from the 1-node Ray
    comparison (one repeat at a time: no sharing of the cores), the Ray task's share being
    its wall time less the repeats' own times."""
    one = next((m for m in measured if m.nodes == 1), measured[0])
    per_run = _mean(one.tuning) / max(one.runs, 1)
    per_retest = _mean(one.retest) / max(one.retest_runs, 1)
    inside = sum(one.setup) + sum(one.walls) + sum(one.retest)
    # What the repeats' own figures do not cover (their databases, the preloader, Ray's
    # scheduling and the driver's storing), spread over the repeats, plus their start-up.
    per_repeat = (one.wall - inside) / one.repeats + _mean(one.setup)
    return per_repeat, per_run, per_retest


def _makespan(durations: list[float], nodes: int) -> float:
    """Tasks handed to the first free node in order (Ray's queue, one repeat per node)."""
    free = [0.0] * nodes
    heapq.heapify(free)
    end = 0.0
    for duration in durations:
        start = heapq.heappop(free)
        heapq.heappush(free, start + duration)
        end = max(end, start + duration)
    return end


def _paper(measured: list[Measured]) -> None:
    per_repeat, per_run, per_retest = _overheads(measured)
    run = REAL_RUN_MINUTES * 60.0
    control = per_repeat + (run + per_run) + PAPER_RETESTS * (run + per_retest)
    tuned = per_repeat + PAPER_BUDGET * (run + per_run) + PAPER_RETESTS * (run + per_retest)
    durations = [
        control if arm == "default" else tuned for _ in range(PAPER_REPEATS) for arm in PAPER_ARMS
    ]
    total = sum(durations)
    print()
    print(
        f"on paper: {','.join(PAPER_ARMS)} x {PAPER_REPEATS} repeats x {PAPER_BUDGET} runs,"
        f" {PAPER_RETESTS} held-out seeds, {REAL_RUN_MINUTES:g}-minute runs; measured overhead"
        f" {per_repeat:.1f} s per repeat, {per_run:.2f} s per run, {per_retest:.2f} s per"
        " re-test run"
    )
    print(
        f"a tuned repeat: {tuned / 3600:.2f} h ({PAPER_BUDGET} + {PAPER_RETESTS} runs); the"
        f" control arm's: {control / 3600:.2f} h (1 + {PAPER_RETESTS}); overhead"
        f" {100 * (tuned - (PAPER_BUDGET + PAPER_RETESTS) * run) / tuned:.3f}% of a tuned repeat"
    )
    print(f"{'GPU nodes':>9} {'wall time':>12} {'speed-up':>8} {'of the ideal 1/N':>16}")
    for nodes in PAPER_NODES:
        wall = _makespan(durations, nodes)
        print(
            f"{nodes:>9} {_duration(wall):>12} {total / wall:>7.1f}x"
            f" {100 * (total / nodes) / wall:>15.0f}%"
        )
    print(
        "a repeat's runs are sequential, so no number of nodes brings the comparison under one"
        f" tuned repeat ({tuned / 3600:.1f} h): 40 nodes for 40 repeats are at that floor"
    )


def _duration(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours / 24:.1f} d" if hours >= 48 else f"{hours:.1f} h"


if __name__ == "__main__":
    sys.exit(main())
