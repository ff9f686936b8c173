"""Benchmark of the report server over a large experiment history.

Loads SnakeLab runs and an Ax3l event history shaped like the real loop's (checkpoints,
conversations with prompts and llama-server replies, tool events, runs, comparisons, golden
promotions with their experiment_highscores rows, seed rotations after nine stagnant cycles)
into private databases of the project's MariaDB, starts ``ax3l-reports`` as a subprocess and
prints p50/p95 latency of ``/events``, ``/api/events`` (first page, a deep page, each filter) and
``/experiment-highscores``. Targets: p95 under 150 ms everywhere, the deep page no slower than
twice the first page.

    uv run python bench/bench_reports.py                        # 1,000,000 events, 100,000 runs
    uv run python bench/bench_reports.py --events 200000 --runs 20000    # a quick run
    uv run python bench/bench_reports.py --keep                 # keep the data for the next run

Data that is already loaded with the same sizes (``--keep``) is reused.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pymysql

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db import run_provenance
from ax3l.shared.db.cli import ensure_schema
from ax3l.shared.db.tables import SNAKELAB_TABLES, ddl
from ax3l.shared.events import CATALOG
from ax3l.shared.ports import free_port
from ax3l.shared.processes import ManagedProcess, ProcessFailed
from ax3l.shared.registry import ENTRIES, PARAMETER_ORDER
from ax3l.shared.settings import Settings
from ax3l.testing.databases import admin_connection, ax3l_settings, private_db_env
from ax3l.testing.scripted_llm import completion, tool_call

ROOT = Path(__file__).resolve().parents[1]
AX3L_DB = "ax3l_bench_reports"
SNAKELAB_DB = "snakelab_bench_reports"
TARGET_P95_MS = 150.0
BATCH = 5000


def read_env() -> dict[str, str]:
    return private_db_env(ROOT)


def connect(env: dict[str, str], database: str | None = None) -> Any:
    return admin_connection(env, database)


def settings(env: dict[str, str]) -> Settings:
    return ax3l_settings(env, AX3L_DB, SNAKELAB_DB)


# -- data -----------------------------------------------------------------------------------


@dataclass
class Loaded:
    events: int = 0
    runs: int = 0
    goldens: int = 0
    steps: int = 0
    seconds: float = 0.0


@dataclass
class History:
    """Rows of the event history, produced in order and flushed in batches."""

    events: list[tuple[Any, ...]] = field(default_factory=list)
    messages: list[tuple[int, str]] = field(default_factory=list)
    highscores: list[tuple[int, int, int, int]] = field(default_factory=list)
    next_id: int = 1
    clock: datetime = datetime(2026, 1, 1)

    def add(
        self,
        name: str,
        content: Any,
        *,
        process: str | None = None,
        parent: int | None = None,
        source: str | None = None,
        parameter: str | None = None,
    ) -> int:
        category, level = CATALOG[name]
        event_id = self.next_id
        self.next_id += 1
        self.clock += timedelta(milliseconds=random.randint(5, 4000))
        self.events.append(
            (
                event_id,
                self.clock,
                name,
                category.value,
                level.value,
                process,
                parent,
                source,
                parameter,
                "ax3l-0.1.0",
            )
        )
        if content is not None:
            text = content if isinstance(content, str) else json.dumps(content)
            self.messages.append((event_id, text))
        return event_id

    def golden(
        self, run_id: str, score: int, seed: int, simulations: int, reason: str, **extra: Any
    ) -> None:
        """``golden_config_created`` for ``run_id`` and its highscore row."""
        parent = extra.pop("parent", None)
        golden_id = self.add(
            "golden_config_created",
            {
                "run_id": run_id,
                "high_score": score,
                "seed": seed,
                "simulations": simulations,
                "reason": reason,
                "config": {"seed": seed},
                **extra,
            },
            process=run_id,
            parent=parent,
        )
        self.highscores.append((golden_id, simulations, score, seed))


PROMPT_FILLER = (
    "For each tested value of this parameter, current-seed results and earlier-seed high"
    " scores follow; only runs whose other settings equal the golden configuration's count. "
)


def prompt_text(kind: str, parameter: str, golden: int) -> str:
    if kind == "ProjectContext":
        return (
            "You are tuning the hyperparameters of the Snake agent from Patrick Loeber's"
            ' "Train an AI to Play Snake" project. You choose the parameters; SnakeLab trains.'
        )
    if kind == "Comparison":
        rows = [
            {"run_id": str(uuid.uuid4()), "status": "completed", "high_score": golden - i}
            for i in range(4)
        ]
        return f"Current golden {parameter} scored {golden}.\n" + PROMPT_FILLER + json.dumps(rows)
    return (
        f"Choose one untested value for {parameter} through the tool. It is a number within"
        " the schema's range; values already tested on this seed are rejected."
    )


def reply_content(entry_index: int, value: float, step: int) -> dict[str, Any]:
    entry = ENTRIES[entry_index]
    message = {
        "role": "assistant",
        "content": "",
        "reasoning_content": "The last values scored lower; a smaller step next." * 3,
        "tool_calls": [
            tool_call(entry.tool_name, {name: value for name in entry.value_names}, f"call_{step}")
        ],
    }
    return completion(
        message,
        "tool_calls",
        completion_id=f"chatcmpl-{step}",
        model="Qwen3.5-4B-Q4_K_M.gguf",
        usage={"prompt_tokens": 512, "completion_tokens": 301, "total_tokens": 813},
        timings={
            "prompt_n": 512,
            "prompt_ms": 900.1,
            "prompt_per_second": 568.8,
            "predicted_n": 301,
            "predicted_ms": 20040.3,
            "predicted_per_second": 15.02,
        },
    )


def history(target_events: int, run_ids: list[str], run_scores: list[int]) -> Iterator[History]:
    """The loop's events until about ``target_events``, yielded in batches (rows cleared)."""
    rng = random.Random(1970)
    out = History()
    seed = 1970
    golden_score = run_scores[0]
    golden_run = run_ids[0]
    run_index = 1
    index = 0
    stagnant_steps = 0
    out.golden(golden_run, golden_score, seed, 1, "Initial configuration.")
    while out.next_id <= target_events and run_index < len(run_ids):
        run_id = run_ids[run_index]
        score = run_scores[run_index]
        run_index += 1
        if stagnant_steps >= 9 * len(ENTRIES):
            seed += 1
            out.add("seed_rotation_started", {"seed": seed, "config": {"seed": seed}})
            out.add("golden_config_seed_incremented", {"from": seed - 1, "to": seed})
            submitted = out.add("simulation_submitted", {"run_id": run_id}, process=run_id)
            out.add("simulation_completed", {"run_id": run_id}, process=run_id, parent=submitted)
            out.golden(run_id, score, seed, run_index, f"Fresh baseline for seed {seed}.")
            golden_score, golden_run, stagnant_steps = score, run_id, 0
            continue
        entry = ENTRIES[index]
        out.add(
            "round_robin_checkpoint", {"parameter_order": list(PARAMETER_ORDER), "index": index}
        )
        if entry.kind == "single" and rng.random() < 0.03:
            out.add("parameter_space_exhausted", {"parameter": entry.name})
            run_index -= 1  # nothing was submitted
        else:
            conversation = str(uuid.uuid4())
            out.add(
                "conversation_started",
                {"parameter": entry.name, "proposer": "llm"},
                process=conversation,
            )
            prompt = 0
            for kind in ("ProjectContext", "Comparison", "ComparisonSingle"):
                prompt = out.add(
                    "prompt_sent",
                    prompt_text(kind, entry.name, golden_score),
                    process=conversation,
                    source=kind,
                    parameter=entry.name,
                )
            if rng.random() < 0.15:
                reply = out.add(
                    "reply_received",
                    reply_content(index, 0.5, out.next_id),
                    process=conversation,
                    parent=prompt,
                )
                out.add(
                    "proposal_rejected_duplicate",
                    {"reason": "already ran"},
                    process=conversation,
                    parent=reply,
                )
                prompt = out.add(
                    "prompt_sent",
                    "NoDupes: that configuration already ran.",
                    process=conversation,
                    source="NoDupes",
                    parameter=entry.name,
                )
            reply = out.add(
                "reply_received",
                reply_content(index, 0.97, out.next_id),
                process=conversation,
                parent=prompt,
            )
            out.add("tool_request_received", {"method": entry.tool_name}, process=conversation)
            out.add("tool_execution_started", {"method": entry.tool_name}, process=conversation)
            out.add(
                "proposal_accepted",
                {"run_id": run_id, "parameter": entry.name, "proposer": "llm"},
                process=conversation,
            )
            submitted = out.add("simulation_submitted", {"run_id": run_id}, process=run_id)
            out.add(
                "tool_execution_completed", {"status": "ok", "run_id": run_id}, process=conversation
            )
            out.add("conversation_ended", {"reason": "submitted"}, process=conversation)
            out.add("simulation_started", {"run_id": run_id}, process=run_id)
            out.add(
                "simulation_completed",
                {"run_id": run_id, "high_score": score},
                process=run_id,
                parent=submitted,
            )
            better = score > golden_score
            compared = out.add(
                "configuration_compared",
                {
                    "golden_run_id": golden_run,
                    "latest_run_id": run_id,
                    "current_golden_run_id": run_id if better else golden_run,
                    "reason": f"High score: {score} {'>' if better else '<='} {golden_score}; "
                    f"{entry.paths[0]}: changed.",
                },
            )
            if better:
                reason = f"High score: {score} > {golden_score}."
                out.golden(run_id, score, seed, run_index, reason, proposer="llm", parent=compared)
                golden_score, golden_run, stagnant_steps = score, run_id, 0
            else:
                stagnant_steps += 1
        index = (index + 1) % len(ENTRIES)
        if len(out.events) >= BATCH:
            yield out
            out.events, out.messages, out.highscores = [], [], []
    yield out


def load(env: dict[str, str], events: int, runs: int) -> Loaded:
    """Create the bench databases and fill them; reuse them when they hold the same sizes."""
    print(f"loading {events:,} events and {runs:,} runs ...", flush=True)
    admin = connect(env)
    try:
        with admin.cursor() as cur:
            cur.execute("SHOW DATABASES LIKE %s", (AX3L_DB,))
            if cur.fetchone():
                try:
                    cur.execute(f"SELECT COUNT(*) FROM `{AX3L_DB}`.events")
                    have_events = cur.fetchone()[0]
                    cur.execute(f"SELECT COUNT(*) FROM `{SNAKELAB_DB}`.simulation_runs")
                    have_runs = cur.fetchone()[0]
                    cur.execute(f"SELECT COUNT(*) FROM `{AX3L_DB}`.experiment_highscores")
                    goldens = cur.fetchone()[0]
                except pymysql.err.MySQLError:
                    have_events = have_runs = goldens = -1
                if have_runs == runs and abs(have_events - events) < 100:
                    ensure_schema(settings(env))  # indexes added since the data was loaded
                    _with_provenance(env)  # the runs' rows, if loaded before they existed
                    return Loaded(have_events, have_runs, goldens)
            for name in (AX3L_DB, SNAKELAB_DB):
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
                cur.execute(
                    f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
                )
            cur.execute(f"GRANT ALL PRIVILEGES ON `{AX3L_DB}`.* TO '{env['DB_USER']}'@'%'")
            cur.execute(f"GRANT SELECT ON `{SNAKELAB_DB}`.* TO '{env['DB_USER']}'@'%'")
    finally:
        admin.close()
    started = time.perf_counter()
    ensure_schema(settings(env))

    sl = connect(env, SNAKELAB_DB)
    rng = random.Random(41970)
    schema = cached_schema(None)
    defaults = schema.flatten(schema.default_config())
    run_ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(runs)]
    scores = [max(0, min(60, round(rng.gauss(38, 5)))) for _ in range(runs)]
    try:
        with sl.cursor() as cur:
            for table in SNAKELAB_TABLES:
                cur.execute(ddl(table))
            cur.execute("SET unique_checks = 0, foreign_key_checks = 0")
            start = datetime(2026, 1, 1)
            columns = ", ".join(schema.columns)
            for offset in range(0, runs, BATCH):
                chunk = range(offset, min(runs, offset + BATCH))
                cur.executemany(
                    "INSERT INTO simulation_runs (run_id, project_version, config_hash, status,"
                    " episode_count, high_score, created_at, started_at, completed_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [
                        (
                            run_ids[i],
                            "2.0.0",
                            f"{rng.getrandbits(256):064x}",
                            "completed" if i < runs - 1 else "running",
                            1500,
                            scores[i],
                            start + timedelta(minutes=5 * i),
                            start + timedelta(minutes=5 * i),
                            start + timedelta(minutes=5 * i + 5) if i < runs - 1 else None,
                        )
                        for i in chunk
                    ],
                )
                rows = []
                for i in chunk:
                    flat = dict(defaults)
                    flat["seed"] = 1970 + i // 150
                    flat["model_hidden_size"] = 64 + 16 * rng.randrange(21)
                    flat["training_gamma"] = round(rng.uniform(0.9, 0.99), 4)
                    rows.append((run_ids[i], *(flat[c] for c in schema.columns)))
                cur.executemany(
                    f"INSERT INTO configurations (run_id, {columns})"
                    f" VALUES (%s{', %s' * len(schema.columns)})",
                    rows,
                )
    finally:
        sl.close()

    ax = connect(env, AX3L_DB)
    loaded = Loaded(runs=runs)
    try:
        with ax.cursor() as cur:
            cur.execute("SET unique_checks = 0, foreign_key_checks = 0")
            for batch in history(events, run_ids, scores):
                cur.executemany(
                    "INSERT INTO events (event_id, occurred_at, name, category, log_level,"
                    " process_id, parent_event_id, source_name, parameter, ax3l_version)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    batch.events,
                )
                cur.executemany(
                    "INSERT INTO event_messages (event_id, content) VALUES (%s, %s)",
                    batch.messages,
                )
                if batch.highscores:
                    cur.executemany(
                        "INSERT INTO experiment_highscores (event_id, simulations, score, seed)"
                        " VALUES (%s, %s, %s, %s)",
                        batch.highscores,
                    )
                loaded.events += len(batch.events)
                loaded.goldens += len(batch.highscores)
                if loaded.events % 100_000 < BATCH:
                    print(f"  loaded {loaded.events:,} events", flush=True)
            cur.execute("ANALYZE TABLE events, event_messages, experiment_highscores")
            cur.fetchall()
    finally:
        ax.close()
    _with_provenance(env)
    loaded.seconds = time.perf_counter() - started
    return loaded


def _with_provenance(env: dict[str, str]) -> None:
    """Each run's ``run_provenance`` row, as the writers make them (the back-fill's rule)."""
    ax = connect(env, AX3L_DB)
    try:
        with ax.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM run_provenance")
            if not cur.fetchone()[0]:
                run_provenance.backfill(cur)
        ax.commit()
    finally:
        ax.close()


def drop(env: dict[str, str]) -> None:
    admin = connect(env)
    try:
        with admin.cursor() as cur:
            for name in (AX3L_DB, SNAKELAB_DB):
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        admin.close()


# -- measuring ------------------------------------------------------------------------------


@contextmanager
def served(
    env: dict[str, str], keep: bool, kept: Callable[[], object] = lambda: None
) -> Iterator[tuple[str, float]]:
    """``ax3l-reports`` over the bench databases: its URL and start-up seconds. On leaving it
    is stopped and the bench databases are dropped, or with ``keep`` ``kept()`` is called."""
    port = free_port()
    child_env = {
        **os.environ,
        "DB_HOST": env["DB_HOST"],
        "DB_PORT": env["DB_PORT"],
        "DB_USER": env["DB_USER"],
        "DB_PASSWORD": env["DB_PASSWORD"],
        "AX3L_DB_NAME": AX3L_DB,
        "AX3L_SNAKELAB_DB_NAME": SNAKELAB_DB,
        "AX3L_HTTP_HOST": "127.0.0.1",
        "AX3L_REPORTS_PORT": str(port),
        # Nothing listens here: the status bar shows SnakeLab unavailable, as pages must cope.
        "AX3L_SNAKELAB_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
    }
    started = time.perf_counter()
    process = ManagedProcess(
        "ax3l-reports",
        [sys.executable, "-m", "ax3l.reports.main", "--log-level", "warning"],
        child_env,
        None,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        process.wait_ready(ready, 180)
    except ProcessFailed as failure:
        process.stop(10)
        raise SystemExit(str(failure)) from None
    try:
        yield url, time.perf_counter() - started
    finally:
        process.stop(10)
        if keep:
            kept()
        else:
            drop(env)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def measure(client: httpx.Client, path: str, requests: int) -> tuple[float, float]:
    for _ in range(3):
        client.get(path).raise_for_status()
    times = []
    for _ in range(requests):
        began = time.perf_counter()
        reply = client.get(path)
        times.append((time.perf_counter() - began) * 1000)
        reply.raise_for_status()
    return statistics.median(times), p95(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events to load")
    parser.add_argument("--runs", type=int, default=100_000, help="SnakeLab runs to load")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per URL")
    parser.add_argument("--keep", action="store_true", help="keep the bench databases")
    args = parser.parse_args(argv)

    env = read_env()
    loaded = load(env, args.events, args.runs)
    if loaded.seconds:
        print(f"loaded in {loaded.seconds:.1f} s", flush=True)
    else:
        print("reusing the loaded bench databases", flush=True)
    print(
        f"data: {loaded.events:,} events, {loaded.runs:,} runs,"
        f" {loaded.goldens:,} experiment_highscores rows"
    )
    failures = []
    with served(env, args.keep) as (url, startup):
        print(f"ax3l-reports ready in {startup:.1f} s (includes counting cycles over the history)")
        deep = max(1, loaded.events // 1000)
        cases = [
            ("/events (event log page, first)", "/events"),
            ("/events (event log page, deep)", f"/events?before={deep}"),
            ("/events?event=prompt_sent (Parameter column)", "/events?event=prompt_sent"),
            ("/api/events (first page)", "/api/events"),
            ("/api/events (deep page)", f"/api/events?before={deep}"),
            ("/api/events?category=Configuration", "/api/events?category=Configuration"),
            (
                "/api/events?category=Configuration (deep)",
                f"/api/events?category=Configuration&before={deep * 10}",
            ),
            ("/api/events?event=prompt_sent", "/api/events?event=prompt_sent"),
            ("/api/events?event=golden_config_created", "/api/events?event=golden_config_created"),
            (
                "/api/events?event=prompt_sent&parameter=gamma",
                "/api/events?event=prompt_sent&parameter=gamma",
            ),
            (
                "/api/events?parameter=gamma (deep)",
                f"/api/events?parameter=gamma&before={deep * 10}",
            ),
            ("/api/events?event=llm_request_failed (none)", "/api/events?event=llm_request_failed"),
            ("/experiment-highscores", "/experiment-highscores"),
            ("/api/status", "/api/status"),
        ]
        results = {}
        with httpx.Client(base_url=url, timeout=30) as client:
            process_id = client.get("/api/events?event=conversation_started&limit=1").json()[
                "events"
            ][0]["process_id"]
            cases.append(
                ("/api/events?process=<conversation>", f"/api/events?process={process_id}")
            )
            print(f"\n{'URL':<52} {'p50 ms':>8} {'p95 ms':>8}")
            for name, path in cases:
                p50, p95 = measure(client, path, args.requests)
                results[name] = (p50, p95)
                flag = "" if p95 < TARGET_P95_MS else "  <-- over target"
                print(f"{name:<52} {p50:8.1f} {p95:8.1f}{flag}", flush=True)
                if p95 >= TARGET_P95_MS:
                    failures.append(name)
        pairs = [
            ("/events", "/events (event log page, first)", "/events (event log page, deep)"),
            ("/api/events", "/api/events (first page)", "/api/events (deep page)"),
        ]
        for label, first, deep_name in pairs:
            ratio = results[deep_name][1] / results[first][1]
            print(f"deep/first page p95 ratio of {label}: {ratio:.2f} (target <= 2)")
            if ratio > 2:
                failures.append(f"{label} deep page")
    print("\nall targets met" if not failures else f"\nover target: {', '.join(failures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
