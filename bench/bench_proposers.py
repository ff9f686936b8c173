"""Benchmark of ``/proposers`` with 100,000 conversations in a real headless browser.

Loads the reports bench's data (``bench/bench_reports.py``: 1,000,000 events and 100,000 runs,
reused when already loaded), adds conversations at the end of the history until it holds
``--conversations`` of them (each a ``conversation_started``, a ``reply_received`` naming a
model and a ``proposal_accepted`` of a loaded run, the proposers taking turns), starts
``ax3l-reports`` and prints: the first (cold) load of ``/api/proposers``; p50/p95 of the first
contentful paint and of the load event of ``/proposers`` in Debian's Chromium over ``--loads``
loads (goal: p95 <= 1 s); and p50/p95 of a load right after a new conversation was logged (the
incremental fold). The added conversations are deleted afterwards, so the reports bench's data
stays reusable.

    uv run python bench/bench_proposers.py                 # 100,000 conversations
    uv run python bench/bench_proposers.py --keep          # keep the data for the next run
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

# The checkout's root: bench/ is a namespace package there (as mypy names it too).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ax3l.shared.events import CATALOG
from bench.bench_reports import AX3L_DB, SNAKELAB_DB, connect, load, read_env, served
from bench.bench_runs_page import (
    CHROMIUM,
    LAUNCH_ARGS,
    PAGE_GOAL_MS,
    load_page,
    page_row,
    timed_loads,
)

PROPOSERS = ("llm", "tpe", "random")
MODEL = "gemma-3-270m-it-Q4_K_M.gguf"


def _conversation(
    event_id: int, when: datetime, run_id: str, number: int
) -> tuple[list[tuple[Any, ...]], list[tuple[int, str]]]:
    """One conversation's three events and their contents, from ``event_id`` on."""
    process = f"bench-conversation-{number}"
    proposer = PROPOSERS[number % len(PROPOSERS)]
    names = ("conversation_started", "reply_received", "proposal_accepted")
    events = [
        (
            event_id + offset,
            when,
            name,
            CATALOG[name][0].value,
            CATALOG[name][1].value,
            process,
            "ax3l-0.1.0",
        )
        for offset, name in enumerate(names)
    ]
    reply = {
        "model": MODEL,
        "usage": {"completion_tokens": 40 + number % 30},
        "timings": {"prompt_ms": 300.0 + number % 200, "predicted_ms": 900.0},
    }
    messages = [
        (event_id, json.dumps({"proposer": proposer, "parameter": "training_gamma"})),
        (event_id + 1, json.dumps(reply)),
        (
            event_id + 2,
            json.dumps({"run_id": run_id, "parameter": "training_gamma", "proposer": proposer}),
        ),
    ]
    return events, messages


def add_conversations(env: dict[str, str], wanted: int) -> tuple[int, int]:
    """Conversations appended until the history holds ``wanted``: (how many it held, the first
    added event's id or 0 when none was added)."""
    ax = connect(env, AX3L_DB)
    try:
        with ax.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM events WHERE name = 'conversation_started'")
            have = int(cur.fetchone()[0])
            cur.execute("SELECT MAX(event_id), MAX(occurred_at) FROM events")
            newest, when = cur.fetchone()
            cur.execute(f"SELECT run_id FROM `{SNAKELAB_DB}`.simulation_runs ORDER BY id")
            run_ids = [row[0] for row in cur.fetchall()]
            if have >= wanted:
                return have, 0
            first = int(newest) + 1
            events: list[tuple[Any, ...]] = []
            messages: list[tuple[int, str]] = []
            for number in range(wanted - have):
                at = when + timedelta(seconds=number)
                more, texts = _conversation(
                    first + 3 * number, at, run_ids[number % len(run_ids)], number
                )
                events += more
                messages += texts
            for start in range(0, len(events), 5000):
                cur.executemany(
                    "INSERT INTO events (event_id, occurred_at, name, category, log_level,"
                    " process_id, ax3l_version) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    events[start : start + 5000],
                )
                cur.executemany(
                    "INSERT INTO event_messages (event_id, content) VALUES (%s, %s)",
                    messages[start : start + 5000],
                )
        ax.commit()
        return have, first
    finally:
        ax.close()


def remove_from(env: dict[str, str], first: int) -> None:
    ax = connect(env, AX3L_DB)
    try:
        with ax.cursor() as cur:
            cur.execute("DELETE FROM event_messages WHERE event_id >= %s", (first,))
            cur.execute("DELETE FROM events WHERE event_id >= %s", (first,))
        ax.commit()
    finally:
        ax.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events to load")
    parser.add_argument("--runs", type=int, default=100_000, help="SnakeLab runs to load")
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--loads", type=int, default=10, help="timed loads")
    parser.add_argument("--keep", action="store_true", help="keep the bench databases")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    env = read_env()
    loaded = load(env, args.events, args.runs)
    had, first_added = add_conversations(env, args.conversations)
    added = args.conversations - had if first_added else 0
    print(
        f"data: {loaded.events + 3 * added:,} events, {loaded.runs:,} runs,"
        f" {had + added:,} conversations ({added:,} added)",
        flush=True,
    )
    over = False
    numbers = itertools.count(10_000_000)
    # With --keep, the reports bench's data as it was, reusable by bench_runs_page.py.
    with served(env, args.keep, lambda: remove_from(env, _first_added(env))) as (url, startup):
        print(f"ax3l-reports ready in {startup:.1f} s")
        with httpx.Client(base_url=url, timeout=600) as client:
            began = time.perf_counter()
            cold = client.get("/api/proposers")
            cold.raise_for_status()
            body = cold.json()
            print(
                f"/api/proposers, first (cold) request: {time.perf_counter() - began:.2f} s"
                f" ({sum(p['conversations'] for p in body['proposers']):,} conversations)"
            )
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
                try:
                    context = browser.new_context(viewport={"width": 1400, "height": 1000})
                    page = context.new_page()
                    target = url + "/proposers"
                    load_page(page, target, False)  # warm-up
                    paints, readies = timed_loads(page, target, False, args.loads)
                    add = lambda: add_one(env, next(numbers))  # noqa: E731
                    after_paints, after_readies = timed_loads(page, target, False, args.loads, add)
                    context.close()
                finally:
                    browser.close()
            print(
                f"\n{'/proposers':<40} {'paint p50':>10} {'paint p95':>10}"
                f" {'ready p50':>10} {'ready p95':>10}  (ms)"
            )
            for name, p, r in (
                ("unchanged history", paints, readies),
                ("after a new conversation each", after_paints, after_readies),
            ):
                over = page_row(name, p, r, PAGE_GOAL_MS) or over
    print("\nover goal" if over else "\ngoal met")
    return 0


def add_one(env: dict[str, str], number: int) -> int:
    """One more conversation at the end of the history; its first event's id."""
    ax = connect(env, AX3L_DB)
    try:
        with ax.cursor() as cur:
            cur.execute("SELECT MAX(event_id), MAX(occurred_at) FROM events")
            newest, when = cur.fetchone()
            cur.execute(f"SELECT run_id FROM `{SNAKELAB_DB}`.simulation_runs LIMIT 1")
            run_id = cur.fetchone()[0]
            events, messages = _conversation(int(newest) + 1, when, run_id, number)
            cur.executemany(
                "INSERT INTO events (event_id, occurred_at, name, category, log_level,"
                " process_id, ax3l_version) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                events,
            )
            cur.executemany(
                "INSERT INTO event_messages (event_id, content) VALUES (%s, %s)", messages
            )
        ax.commit()
        return int(newest) + 1
    finally:
        ax.close()


def _first_added(env: dict[str, str]) -> int:
    """The first event of the conversations this bench added (their process ids say so)."""
    ax = connect(env, AX3L_DB)
    try:
        with ax.cursor() as cur:
            cur.execute(
                "SELECT MIN(event_id) FROM events WHERE process_id LIKE 'bench-conversation-%'"
            )
            found = cur.fetchone()[0]
        return int(found) if found is not None else 1 << 62
    finally:
        ax.close()


if __name__ == "__main__":
    sys.exit(main())
