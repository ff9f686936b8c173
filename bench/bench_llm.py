"""LLM path benchmarks.

``prompt_sizes()``: the estimated prompt tokens of a conversation for comparable histories of
100, 10,000 and 100,000 runs (whole, and fitted to the default budget: a 16,384-token context,
4,096 reply tokens, the tool, three corrections), and how long fitting takes.
``history_load()``: how long ``load_history`` takes to read 100,000 comparable runs (plus
10,000 that differ in another setting) from SnakeLab's tables in the private MariaDB.

``real_model()``: the stack against a real llama-server (``make llm-start``) for ``--turns``
turns on 1 s surrogate runs: accepted proposals per hour, model requests per accepted model
proposal (wasted turns), the share of turns the fallback took, seconds and completion tokens
per model request; asks (model requests), wasted asks by reason (``ax3l.shared.wasted``: what
the LLM conversations' ``conversation_ended`` count, the broker's refusals included) and their
share. ``--grammar`` (``AX3L_LLM_GRAMMAR=true``) measures the grammar-constrained request,
``--before-after`` the tool-calling request and then the grammar's, one after the other.

    uv run python bench/bench_llm.py [--runs 100000] [--url http://127.0.0.1:27770 --turns 30]
    uv run python bench/bench_llm.py --only-model --url http://127.0.0.1:27770 --before-after

The held-out comparison of the issue (2 repeats, budget 14) is ``bench/bench_compare.py``'s:

    AX3L_LLM_GRAMMAR=true uv run python bench/bench_compare.py \
        --proposers default,model,llm+model --repeats 2 --budget 14 --url http://127.0.0.1:27770
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

from ax3l.orchestrator.comparable_history import ComparableHistory, load_history
from ax3l.orchestrator.prompt_budget import (
    DEFAULT_CONTEXT_TOKENS,
    estimate_tokens,
    prompt_token_budget,
)
from ax3l.orchestrator.prompts import PromptContext, conversation_prompts, prompts_tokens
from ax3l.shared.config_schema import load_schema
from ax3l.shared.db.database import Database
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.shared.registry import BY_NAME, Entry
from ax3l.testing.chaos import percentile
from ax3l.testing.databases import TestDatabases, create_snakelab_tables, scratch_databases
from ax3l.testing.histories import synthetic_history

REPO = Path(__file__).resolve().parents[1]
SCHEMA = load_schema()
DEFAULTS = SCHEMA.default_config()
SEED = 1990
SEEDS = 21  # the user's real experiment went through 16 seeds in about 1,800 runs
GOLDEN = GoldenConfigCreated(
    run_id="golden", config=DEFAULTS, high_score=45, seed=SEED, simulations=1, reason="bench"
)
SIZES = (100, 10_000, 100_000)
ENTRIES = ("learning_rate", "hidden_size", "epsilon_pair", "reward_pair")
MAX_TOKENS = 4096
CORRECTIONS = 3


def _history(entry: Entry, runs: int) -> ComparableHistory:
    return synthetic_history(SCHEMA, entry, runs, seed=SEED, seeds=SEEDS, rng=random.Random(runs))


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
            ctx = PromptContext.of(SCHEMA, GOLDEN, history, False)
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
    from ax3l.testing.plugin import read_env_file

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


def real_model(
    url: str,
    turns: int,
    max_tokens: int = 256,
    constrained: bool = True,
    grammar: bool = False,
    fallback_after: int = 3,
) -> dict[str, float]:
    """The loop against the real model server until ``turns`` proposals were accepted."""
    import statistics
    import subprocess
    import tempfile

    from ax3l.testing.plugin import read_env_file
    from ax3l.testing.stack import Stack

    subprocess.run([str(REPO / "scripts" / "mariadb.sh"), "start"], check=True)
    env = {
        "AX3L_LLM_MAX_TOKENS": str(max_tokens),
        "AX3L_LLM_TIMEOUT": "120",
        "AX3L_CONVERSATION_TIMEOUT": "300",
        "AX3L_LLM_CONSTRAINED": "true" if constrained else "false",
        "AX3L_LLM_GRAMMAR": "true" if grammar else "false",
        "AX3L_LLM_FALLBACK_AFTER": str(fallback_after),
    }
    with (
        scratch_databases(read_env_file(REPO / ".run" / "db.env"), prefix="b") as dbs,
        tempfile.TemporaryDirectory() as folder,
    ):
        stack = Stack(dbs, Path(folder))
        try:
            stack.start(surrogate_seconds=1.0)
            began = time.monotonic()
            proc = stack.orchestrator("llm", url=url, env=env)
            stack.wait_for(
                lambda: stack.count("proposal_accepted") >= turns, 6 * 3600, "the turns", proc
            )
            hours = (time.monotonic() - began) / 3600
            proc.stop()
            started = {e.process_id: e for e in stack.events("conversation_started")}
            accepted = stack.events("proposal_accepted")
            ended = [
                e for e in stack.events("conversation_ended") if e.get("outcome") == "accepted"
            ]
            by_fallback = [e for e in ended if started[e.process_id].get("fallback_for")]
            by_model = [e for e in ended if not started[e.process_id].get("fallback_for")]
            replies = stack.events("reply_received")
            failures = stack.events("llm_request_failed")
            unanswered = [f for f in failures if not f.get("correctable")]
            requests = len(replies) + len(unanswered)
            seconds = [
                (r.content.get("timings") or {}).get("predicted_ms", 0) / 1000
                + (r.content.get("timings") or {}).get("prompt_ms", 0) / 1000
                for r in replies
            ]
            tokens = [float(r.content["usage"]["completion_tokens"]) for r in replies]
            prompt_seconds = [
                (r.content.get("timings") or {}).get("prompt_ms", 0) / 1000 for r in replies
            ]
            prompt_tokens = [
                float((r.content.get("timings") or {}).get("prompt_n", 0)) for r in replies
            ]
            kinds: dict[str, int] = {}
            for failure in failures:
                kinds[failure.get("kind")] = kinds.get(failure.get("kind"), 0) + 1
            wasted: Counter[str] = Counter()
            for ended_event in stack.events("conversation_ended"):
                if not started[ended_event.process_id].get("fallback_for"):
                    wasted.update(ended_event.get("wasted") or {})
        finally:
            stack.close()
    figures = {
        "turns": float(len(accepted)),
        "accepted_per_hour": len(accepted) / hours,
        "model_requests_per_model_proposal": requests / max(1, len(by_model)),
        "fallback_share": len(by_fallback) / max(1, len(ended)),
        "request_seconds_p50": statistics.median(seconds) if seconds else 0.0,
        "request_seconds_p95": percentile(seconds, 0.95) if seconds else 0.0,
        "completion_tokens_p50": statistics.median(tokens) if tokens else 0.0,
        "completion_tokens_mean": statistics.fmean(tokens) if tokens else 0.0,
        "prompt_seconds_p50": statistics.median(prompt_seconds) if replies else 0.0,
        "prompt_tokens_evaluated_p50": statistics.median(prompt_tokens) if replies else 0.0,
        "asks": float(requests),
        "wasted_asks": float(sum(wasted.values())),
        "wasted_share": sum(wasted.values()) / max(1, requests),
    }
    print(
        f"real model ({url}, max_tokens {max_tokens}, constrained {constrained},"
        f" grammar {grammar}):"
        f" {len(accepted)} turns in"
        f" {hours * 60:.1f} min = {figures['accepted_per_hour']:.1f} accepted/h;"
        f" {len(by_model)} by the model, {len(by_fallback)} by the fallback"
        f" ({figures['fallback_share']:.0%}); {requests} model requests"
        f" ({figures['model_requests_per_model_proposal']:.1f} per model proposal;"
        f" {len(unanswered)} without a reply); failures {kinds}"
    )
    print(
        f"  seconds per answered request p50 {figures['request_seconds_p50']:.1f}"
        f" p95 {figures['request_seconds_p95']:.1f}; completion tokens per request"
        f" p50 {figures['completion_tokens_p50']:.0f} mean {figures['completion_tokens_mean']:.0f}"
    )
    print(
        f"  of which prompt evaluation p50 {figures['prompt_seconds_p50']:.1f} s for"
        f" {figures['prompt_tokens_evaluated_p50']:.0f} tokens not in the server's cache"
    )
    print(
        f"  asks {requests}, wasted {sum(wasted.values())}"
        f" ({figures['wasted_share']:.0%}) by reason {dict(sorted(wasted.items()))}"
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=100_000, help="rows for the load bench")
    parser.add_argument("--no-db", action="store_true", help="skip the database load bench")
    parser.add_argument("--url", help="a real llama-server: also measure the loop against it")
    parser.add_argument("--turns", type=int, default=30, help="accepted turns for --url")
    parser.add_argument("--max-tokens", type=int, default=256, help="AX3L_LLM_MAX_TOKENS")
    parser.add_argument("--only-model", action="store_true", help="only the real-model bench")
    parser.add_argument(
        "--unconstrained", action="store_true", help="AX3L_LLM_CONSTRAINED=false for --url"
    )
    parser.add_argument("--grammar", action="store_true", help="AX3L_LLM_GRAMMAR=true for --url")
    parser.add_argument(
        "--fallback-after", type=int, default=3, help="AX3L_LLM_FALLBACK_AFTER for --url (3)"
    )
    parser.add_argument(
        "--before-after",
        action="store_true",
        help="--url without the grammar (the tool-calling request), then with it",
    )
    args = parser.parse_args(argv)
    if not args.only_model:
        prompt_sizes()
        if not args.no_db:
            history_load(args.runs)
    if args.url:
        modes = [False, True] if args.before_after else [args.grammar]
        for grammar in modes:
            real_model(
                args.url,
                args.turns,
                args.max_tokens,
                not args.unconstrained,
                grammar,
                args.fallback_after,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
