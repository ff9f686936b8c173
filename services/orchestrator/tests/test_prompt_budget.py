"""Prompts that fit the model's context however long the experiment has run."""

from __future__ import annotations

import json
import math
import random
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import closing
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ax3l.orchestrator.comparable_history import (
    CURRENT_RUNS_SHOWN,
    ComparableHistory,
    HistoryRun,
    load_history,
)
from ax3l.orchestrator.prompt_budget import (
    CORRECTION_TOKENS,
    DEFAULT_CONTEXT_TOKENS,
    MIN_PROMPT_TOKENS,
    TEMPLATE_TOKENS,
    context_tokens,
    estimate_tokens,
    is_context_overflow,
    model_context_tokens,
    prompt_token_budget,
)
from ax3l.orchestrator.prompts import PromptContext, conversation_prompts, prompts_tokens
from ax3l.shared.config_schema import load_schema
from ax3l.shared.db.database import Database
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.shared.registry import BY_NAME
from ax3l.testing.databases import TestDatabases
from ax3l.testing.histories import synthetic_history
from ax3l.testing.plugin import free_port

SCHEMA = load_schema()
DEFAULTS = SCHEMA.default_config()
SEED = 1990
GOLDEN = GoldenConfigCreated(
    run_id="golden-run", config=DEFAULTS, high_score=45, seed=SEED, simulations=3, reason="x"
)
BUDGET = 10_000
JSON_BLOCK = re.compile(r"```json\n(.*)\n```", re.S)


def long_history(name: str, runs: int, seeds: int = 21, seed: int = 7) -> ComparableHistory:
    """``runs`` comparable runs spread over ``seeds`` seeds ending at the current one."""
    rng = random.Random(seed)
    return synthetic_history(
        SCHEMA, BY_NAME[name], runs, seed=SEED, seeds=seeds, rng=rng, failed_share=0.25
    )


def context(history: ComparableHistory, first: bool = False) -> PromptContext:
    return PromptContext.of(SCHEMA, GOLDEN, history, first)


def report_json(prompts: list[Any]) -> list[dict[str, Any]]:
    comparison = next(p for p in prompts if p.source_name == "Comparison")
    match = JSON_BLOCK.search(comparison.text)
    assert match is not None, comparison.text
    parsed = json.loads(match.group(1))
    assert isinstance(parsed, list)
    return parsed


@pytest.mark.parametrize("name", ["learning_rate", "hidden_size", "epsilon_pair", "reward_pair"])
def test_a_history_of_100000_runs_fits_the_budget(name: str) -> None:
    """100,000 comparable runs still give prompts under the budget (how long building them
    takes, at 100 to 100,000 runs: ``bench/bench_llm.py``)."""
    history = long_history(name, 100_000)
    prompts = conversation_prompts(context(history), BUDGET)
    assert prompts_tokens(prompts) <= BUDGET
    assert [p.source_name for p in prompts] == [
        p.source_name for p in conversation_prompts(context(long_history(name, 3)))
    ]
    # A finite domain (21 hidden sizes, 49 reward pairs) fits once summarised; the rest trim.
    finite = name in ("hidden_size", "reward_pair")
    assert ("Left out to fit the model's context" in prompts[1].text) is not finite
    assert "best and mean high score" in prompts[1].text or "runs, best" in prompts[1].text


@pytest.mark.parametrize("name", ["learning_rate", "hidden_size"])
def test_the_json_block_parses_at_every_shrink_level(name: str) -> None:
    """Each shrink level halves the budget, stays under it, and keeps a whole JSON block."""
    history = long_history(name, 20_000)
    total_values = len(history.value_groups)
    smallest = prompts_tokens(conversation_prompts(context(history), 0))
    previous = None
    for shrink in range(8):
        prompts = conversation_prompts(context(history), BUDGET, shrink)
        assert prompts_tokens(prompts) <= max(BUDGET >> shrink, smallest)
        groups = report_json(prompts)
        shown = len(groups)
        omitted = re.search(r"Left out to fit the model's context: (\d+) further", prompts[1].text)
        assert shown + (int(omitted.group(1)) if omitted else 0) == total_values
        assert previous is None or shown <= previous
        previous = shown
    assert previous == 0  # the smallest form lists no value, only the line on the rest


def test_a_single_seed_value_with_many_runs_lists_its_latest_and_sums_up_the_rest() -> None:
    """A value run many times on this seed shows its latest runs and an aggregate of the older."""
    entry = BY_NAME["hidden_size"]
    runs = tuple(
        HistoryRun(f"r{i:05d}", "completed", i % 50, SEED, (224 if i % 2 else 240,))
        for i in range(10_000)
    )
    history = ComparableHistory(entry, SEED, (224,), runs)
    groups = report_json(conversation_prompts(context(history), 2_000))
    assert [g["value"] for g in groups] == [224, 240]
    for group in groups:
        assert len(group["current_seed"]) == CURRENT_RUNS_SHOWN
        assert group["current_seed_older"]["runs"] == 5_000 - CURRENT_RUNS_SHOWN
        assert group["earlier_seeds"] == {"runs": 0, "best": None, "mean": None}
    assert groups[0]["current_seed"][-1] == {"status": "completed", "high_score": 9_999 % 50}
    assert "run_id" not in json.dumps(groups)


def test_earlier_seeds_are_aggregated_per_value_before_any_value_is_left_out() -> None:
    """When only the earlier seeds' lists are too long they become {runs, best, mean}."""
    entry = BY_NAME["hidden_size"]
    runs = [HistoryRun("now", "completed", 41, SEED, (224,))]
    runs += [
        HistoryRun(f"old{i}", "completed", 30 + i % 10, 10_000 + i, (224 + 16 * (i % 3),))
        for i in range(3_000)
    ]
    history = ComparableHistory(entry, SEED, (224,), tuple(runs))
    prompts = conversation_prompts(context(history), 4_000)
    groups = report_json(prompts)
    assert [g["value"] for g in groups] == [224, 240, 256]
    assert groups[0]["current_seed"] == [{"status": "completed", "high_score": 41}]
    assert groups[0]["earlier_seeds"] == {"runs": 1000, "best": 39, "mean": 34.5}
    assert "best and mean high score" in prompts[1].text
    assert "Left out" not in prompts[1].text


def test_values_kept_are_the_current_seeds_best_and_latest() -> None:
    """Trimmed, the current seed's best values and most recent values stay; older ones go."""
    entry = BY_NAME["learning_rate"]
    runs = tuple(
        HistoryRun(f"r{i}", "completed", 99 if i == 7 else i % 40, SEED, (0.0005 + i * 1e-6,))
        for i in range(4_000)
    )
    history = ComparableHistory(entry, SEED, (0.001,), runs)
    groups = report_json(conversation_prompts(context(history), 3_000))
    shown = {group["value"] for group in groups}
    assert {runs[7].values[0], runs[3999].values[0], runs[3998].values[0]} <= shown
    assert runs[0].values[0] not in shown  # neither among the best nor recent
    assert 0 < len(groups) < 4_000
    assert [g["value"] for g in groups] == sorted(g["value"] for g in groups)


def test_pair_tables_are_summarised_with_a_line_on_what_was_left_out() -> None:
    """A pair's table keeps within the budget, aggregating earlier seeds per row."""
    history = long_history("epsilon_pair", 100_000)
    prompts = conversation_prompts(context(history), BUDGET)
    table = prompts[1].text
    assert prompts_tokens(prompts) <= BUDGET
    assert re.search(r"\| \d+ runs?, best \d+, mean [\d.]+ \|", table)
    assert "Left out to fit the model's context" in table


@pytest.mark.parametrize("name", ["hidden_size", "gamma", "epsilon_pair", "reward_pair"])
@pytest.mark.parametrize("first", [True, False])
def test_small_histories_are_unchanged_by_a_budget(name: str, first: bool) -> None:
    """A history that fits is shown exactly as without a budget."""
    ctx = context(long_history(name, 30, seeds=3), first)
    assert conversation_prompts(ctx, BUDGET) == conversation_prompts(ctx)


def test_summaries_are_deterministic() -> None:
    """The same history and budget give the same prompts, whatever was built before."""
    one = conversation_prompts(context(long_history("gamma", 30_000, seed=3)), 5_000, 1)
    two = conversation_prompts(context(long_history("gamma", 30_000, seed=3)), 5_000, 1)
    assert one == two


def test_the_token_estimate_is_conservative_for_prose_json_and_numbers() -> None:
    """Prose costs at least a token per four letters, digits and punctuation one each."""
    assert estimate_tokens("") == 0
    assert estimate_tokens("learning") == 2
    assert estimate_tokens("0.0005") == 6
    assert estimate_tokens('{"a": 1}') == 8
    run_id = "3f2b9c1e-7a4d-4c1b-9e2f-0a1b2c3d4e5f"
    assert estimate_tokens(run_id) >= len(run_id) // 2
    assert estimate_tokens("é") == 2


def test_the_prompt_budget_leaves_room_for_the_reply_tool_template_and_corrections() -> None:
    """Budget = context - max_tokens - template - tool - corrections, never below a floor."""
    tool = {"type": "function", "function": {"name": "submit_single_value"}}
    tool_tokens = estimate_tokens(json.dumps(tool))
    assert prompt_token_budget(16_384, 4_096, tool, 3) == (
        16_384 - 4_096 - TEMPLATE_TOKENS - tool_tokens - 3 * CORRECTION_TOKENS
    )
    assert prompt_token_budget(4_096, 4_096) == MIN_PROMPT_TOKENS


def test_a_context_overflow_is_recognised_from_llama_servers_reply() -> None:
    """HTTP 400 with exceed_context_size_error is an overflow; other errors are not."""
    body = (
        'HTTP 400: {"error":{"code":400,"message":"request (9412 tokens) exceeds the available'
        ' context size (8192 tokens), try increasing it","type":"exceed_context_size_error",'
        '"n_prompt_tokens":9412,"n_ctx":8192}}'
    )
    assert is_context_overflow(400, body)
    assert not is_context_overflow(500, body)
    assert not is_context_overflow(400, 'HTTP 400: {"error":{"message":"invalid tool"}}')
    assert not is_context_overflow(None, "timeout")


PROPS = {
    "/current/props": (200, {"default_generation_settings": {"n_ctx": 8192, "params": {}}}),
    "/old/props": (200, {"n_ctx": 4096}),
    "/zero/props": (200, {"default_generation_settings": {"n_ctx": 0}}),
    "/text/props": (200, {"default_generation_settings": {"n_ctx": "8192"}}),
    "/none/props": (200, {"total_slots": 1}),
    "/list/props": (200, [8192]),
    "/broken/props": (200, "{not json"),
    "/error/props": (500, {"error": "no"}),
}


class PropsHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status, body = PROPS.get(self.path, (404, {"error": "not found"}))
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def props_server() -> Iterator[str]:
    """A real HTTP server answering /props in the shapes llama-server (and others) use."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), PropsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_the_context_size_is_read_from_props(props_server: str) -> None:
    """default_generation_settings.n_ctx is read, a top-level n_ctx accepted, the rest is None."""
    assert await model_context_tokens(props_server + "/current", 5) == 8192
    assert await model_context_tokens(props_server + "/current/", 5) == 8192
    assert await model_context_tokens(props_server + "/old", 5) == 4096
    for path in ("/zero", "/text", "/none", "/list", "/broken", "/error", "/missing"):
        assert await model_context_tokens(props_server + path, 5) is None, path


async def test_the_context_falls_back_from_the_setting_to_props_to_the_default(
    props_server: str,
) -> None:
    """The setting wins; unset, the server's /props; unreadable, 16,384."""
    assert await context_tokens(2048, props_server + "/current", 5) == 2048
    assert await context_tokens(None, props_server + "/current", 5) == 8192
    assert await context_tokens(None, props_server + "/missing", 5) == DEFAULT_CONTEXT_TOKENS
    assert await context_tokens(None, None, 5) == DEFAULT_CONTEXT_TOKENS


async def test_a_server_that_is_not_there_has_no_context_size() -> None:
    """A refused connection gives None, not an exception."""
    assert await model_context_tokens(f"http://127.0.0.1:{free_port()}", 2) is None


Row = tuple[str, str, int | None, dict[str, Any]]


def insert_runs(databases: TestDatabases, rows: list[Row]) -> None:
    """SnakeLab rows (run_id, status, high_score, flat config), as SnakeLab stores them."""
    columns = list(SCHEMA.columns)
    conn = databases.connect("snakelab", databases.snakelab_db)
    with closing(conn), conn.cursor() as cur:
        for start in range(0, len(rows), 5_000):
            batch = rows[start : start + 5_000]
            cur.executemany(
                "INSERT INTO simulation_runs (run_id, project_version, config_hash, status,"
                " high_score, created_at) VALUES (%s, 'test', %s, %s, %s, %s)",
                [(r[0], "0" * 64, r[1], r[2], datetime(2026, 1, 1)) for r in batch],
            )
            cur.executemany(
                f"INSERT INTO configurations (run_id, {', '.join(columns)})"
                f" VALUES (%s, {', '.join(['%s'] * len(columns))})",
                [(r[0], *(r[3][c] for c in columns)) for r in batch],
            )


async def test_the_history_loader_reads_only_comparable_runs(
    snakelab_tables: TestDatabases,
) -> None:
    """Runs differing in another setting are skipped and order is kept, over 5,000 rows (how
    long 110,000 rows take to load: ``bench/bench_llm.py``'s history load)."""
    entry = BY_NAME["learning_rate"]
    golden = SCHEMA.flatten(DEFAULTS)
    rng = random.Random(2)
    rows: list[Row] = []
    for i in range(5_000):
        flat = dict(golden)
        flat["training_learning_rate"] = round(rng.uniform(0.0005, 0.005), 5)
        flat["seed"] = SEED - i % 3
        if i % 10 == 0:
            flat["training_gamma"] = 0.5  # a different setting: not comparable
        if i % 10 == 5:
            flat["model_layers"] = int(flat["model_layers"]) + 1  # likewise
        rows.append((str(uuid.UUID(int=rng.getrandbits(128))), "completed", i % 50, flat))
    insert_runs(snakelab_tables, rows)
    db = await Database(snakelab_tables.settings()).open()
    try:
        history = await load_history(db, SCHEMA, entry, DEFAULTS)
    finally:
        await db.close()
    assert len(history.runs) == 4_000
    assert [run.run_id for run in history.runs] == [
        r[0] for i, r in enumerate(rows) if i % 10 not in (0, 5)
    ]
    prompts = conversation_prompts(context(history), BUDGET)
    assert prompts_tokens(prompts) <= BUDGET


async def test_the_history_loader_compares_floats_exactly(snakelab_tables: TestDatabases) -> None:
    """A float one ulp away is another setting; the same float matches, however it was computed."""
    entry = BY_NAME["learning_rate"]
    gamma = 0.93 + 0.008  # 0.9380000000000001, not the 0.938 a person writes
    config = SCHEMA.with_values(DEFAULTS, {"training.gamma": gamma})
    golden = SCHEMA.flatten(config)
    stored = {
        "same": gamma,
        "recomputed": float("0.9380000000000001"),
        "person": 0.938,
        "ulp": math.nextafter(gamma, 1.0),
    }
    rows: list[Row] = []
    for run_id, value in stored.items():
        rows.append((run_id, "completed", 40, {**golden, "training_gamma": value}))
    insert_runs(snakelab_tables, rows)
    db = await Database(snakelab_tables.settings()).open()
    try:
        history = await load_history(db, SCHEMA, entry, config)
    finally:
        await db.close()
    assert [run.run_id for run in history.runs] == ["same", "recomputed"]
