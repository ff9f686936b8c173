"""LLM path benchmarks.

``prompt_sizes()``: the estimated prompt tokens of a conversation for comparable histories of
100, 10,000 and 100,000 runs (whole, and fitted to the default budget: a 16,384-token context,
4,096 reply tokens, the tool, three corrections), and how long fitting takes.
``history_load()``: how long ``load_history`` takes to read 100,000 comparable runs (plus
10,000 that differ in another setting) from SnakeLab's tables in the private MariaDB.

    uv run python bench/bench_llm.py [--runs 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
import uuid
from datetime import datetime
from pathlib import Path

from ax3l.orchestrator.comparable_history import ComparableHistory, HistoryRun, load_history
from ax3l.orchestrator.prompt_budget import (
    DEFAULT_CONTEXT_TOKENS,
    estimate_tokens,
    prompt_token_budget,
)
from ax3l.orchestrator.prompts import PromptContext, conversation_prompts, prompts_tokens
from ax3l.shared.config_schema import load_schema
from ax3l.shared.db.database import Database
from ax3l.shared.db.reads import GoldenRecord
from ax3l.shared.registry import BY_NAME, Entry
from ax3l.shared.testing.plugin import TestDatabases, create_snakelab_tables, scratch_databases

REPO = Path(__file__).resolve().parents[1]
SCHEMA = load_schema()
DEFAULTS = SCHEMA.default_config()
SEED = 1990
SEEDS = 21  # the user's real experiment went through 16 seeds in about 1,800 runs
GOLDEN = GoldenRecord(
    run_id="golden", config=DEFAULTS, high_score=45, seed=SEED, simulations=1, reason="bench"
)
SIZES = (100, 10_000, 100_000)
ENTRIES = ("learning_rate", "hidden_size", "epsilon_pair", "reward_pair")
MAX_TOKENS = 4096
CORRECTIONS = 3


def _values(name: str, rng: random.Random) -> tuple[int | float, ...]:
    if name == "hidden_size":
        return (64 + 16 * rng.randrange(21),)
    if name == "learning_rate":
        return (round(rng.uniform(0.0005, 0.005), 5),)
    if name == "epsilon_pair":
        return (round(rng.uniform(0.85, 0.999), 3), round(rng.uniform(0.9, 0.999), 3))
    return (rng.randrange(7), -rng.randrange(7))


def _history(entry: Entry, runs: int) -> ComparableHistory:
    rng = random.Random(runs)
    made = tuple(
        HistoryRun(
            str(uuid.UUID(int=rng.getrandbits(128))),
            "completed" if rng.random() < 0.9 else "failed",
            rng.randrange(60),
            SEED - SEEDS + 1 + i * SEEDS // runs,
            _values(entry.name, rng),
        )
        for i in range(runs)
    )
    golden = tuple(SCHEMA.get(DEFAULTS, path) for path in entry.paths)
    return ComparableHistory(entry, SEED, golden, made)


def _tool(entry: Entry) -> dict[str, object]:
    """A tool definition about the size of the bound MCP tool's (description with rules)."""
    rules = " ".join(
        f"{path}: {SCHEMA.by_path[path].description} {SCHEMA.by_path[path].rules_text()}."
        for path in entry.paths
    )
    properties = {name: {"type": "number"} for name in entry.value_names}
    return {
        "type": "function",
        "function": {
            "name": entry.tool_name,
            "description": f"Submit the value(s) of {entry.name}. {rules}",
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


def prompt_sizes() -> None:
    """Print estimated prompt tokens per history size, whole and fitted, with the fit time."""
    print(
        f"prompt tokens (estimated; context {DEFAULT_CONTEXT_TOKENS}, max_tokens {MAX_TOKENS},"
        f" {CORRECTIONS} corrections reserved)"
    )
    print(
        f"{'entry':<14}{'runs':>8}{'values':>8}{'whole':>10}{'fitted':>8}{'budget':>8}"
        f"{'shown':>7}{'fit s':>8}"
    )
    for name in ENTRIES:
        entry = BY_NAME[name]
        tool = _tool(entry)
        budget = prompt_token_budget(DEFAULT_CONTEXT_TOKENS, MAX_TOKENS, tool, CORRECTIONS)
        for runs in SIZES:
            history = _history(entry, runs)
            ctx = PromptContext(
                entry, SCHEMA, GOLDEN, history, False, entry.tool_name, entry.value_names
            )
            started = time.perf_counter()
            fitted = conversation_prompts(ctx, budget)
            seconds = time.perf_counter() - started
            whole = prompts_tokens(conversation_prompts(ctx))
            shown = _shown(fitted[1].text)
            print(
                f"{name:<14}{runs:>8}{len(history.value_groups):>8}{whole:>10}"
                f"{prompts_tokens(fitted):>8}{budget:>8}{shown:>7}{seconds:>8.3f}"
            )
    print(f"(tool definition: ~{estimate_tokens(json.dumps(_tool(BY_NAME['gamma'])))} tokens)")


def _shown(report: str) -> str:
    if "```json" in report:
        block = report.split("```json\n", 1)[1].split("\n```", 1)[0]
        return str(len(json.loads(block)))
    return str(sum(1 for line in report.splitlines() if line.startswith("| ")) - 1)


def _insert(databases: TestDatabases, runs: int) -> None:
    golden = SCHEMA.flatten(DEFAULTS)
    columns = list(SCHEMA.columns)
    rng = random.Random(5)
    conn = databases.connect("snakelab", databases.snakelab_db)
    try:
        with conn.cursor() as cur:
            batch_runs, batch_configs = [], []
            for i in range(runs + runs // 10):
                flat = dict(golden)
                flat["training_learning_rate"] = round(rng.uniform(0.0005, 0.005), 5)
                flat["seed"] = SEED - SEEDS + 1 + (i % runs) * SEEDS // runs
                if i >= runs:
                    flat["training_gamma"] = 0.5  # another setting differs: not comparable
                run_id = str(uuid.UUID(int=rng.getrandbits(128)))
                batch_runs.append((run_id, "completed", rng.randrange(60), datetime(2026, 1, 1)))
                batch_configs.append((run_id, *(flat[c] for c in columns)))
                if len(batch_runs) == 5_000:
                    _flush(cur, columns, batch_runs, batch_configs)
            _flush(cur, columns, batch_runs, batch_configs)
    finally:
        conn.close()


def _flush(cur: object, columns: list[str], runs: list[tuple], configs: list[tuple]) -> None:
    if not runs:
        return
    cur.executemany(  # type: ignore[attr-defined]
        "INSERT INTO simulation_runs (run_id, project_version, config_hash, status, high_score,"
        " created_at) VALUES (%s, 'bench', REPEAT('0', 64), %s, %s, %s)",
        runs,
    )
    cur.executemany(  # type: ignore[attr-defined]
        f"INSERT INTO configurations (run_id, {', '.join(columns)})"
        f" VALUES (%s, {', '.join(['%s'] * len(columns))})",
        configs,
    )
    runs.clear()
    configs.clear()


async def _load(databases: TestDatabases) -> tuple[int, float]:
    db = await Database(databases.settings()).open()
    try:
        started = time.perf_counter()
        history = await load_history(db, SCHEMA, BY_NAME["learning_rate"], DEFAULTS)
        return len(history.runs), time.perf_counter() - started
    finally:
        await db.close()


def history_load(runs: int = 100_000) -> None:
    """Print how long ``load_history`` takes for ``runs`` comparable runs in MariaDB."""
    env_file = REPO / ".run" / "db.env"
    if not env_file.exists():
        print("history load: skipped (no .run/db.env; scripts/mariadb.sh start)")
        return
    from ax3l.shared.testing.plugin import read_env_file

    with scratch_databases(read_env_file(env_file), prefix="b") as databases:
        create_snakelab_tables(databases)
        started = time.perf_counter()
        _insert(databases, runs)
        inserted = time.perf_counter() - started
        loaded, seconds = asyncio.run(_load(databases))
        again, seconds_again = asyncio.run(_load(databases))
    print(
        f"history load: {loaded} comparable of {runs + runs // 10} rows in {seconds:.2f} s"
        f" (again {seconds_again:.2f} s; inserting took {inserted:.1f} s)"
    )
    assert loaded == again == runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=100_000, help="rows for the load bench")
    parser.add_argument("--no-db", action="store_true", help="skip the database load bench")
    args = parser.parse_args(argv)
    prompt_sizes()
    if not args.no_db:
        history_load(args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
