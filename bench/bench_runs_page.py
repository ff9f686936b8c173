"""Benchmark of the dashboard, the runs table and the plots in a real headless browser.

Loads the reports bench's data (``bench/bench_reports.py``: SnakeLab runs and the loop's event
history, reused when already loaded with the same sizes), starts ``ax3l-reports`` as a
subprocess and, in Debian's Chromium through Playwright, loads each page 10 times (after one
warm-up load, so plotly.js comes from the browser's cache as for a returning reader) and prints
p50/p95 of the first contentful paint and of the time until the page is interactive (the load
event, and on plot pages every plot drawn). Goals: p95 <= 1 s per page, <= 2 s for plot pages
with 100,000 points. Then the CSV and Parquet downloads of all runs (p50 of 3).

    uv run python bench/bench_runs_page.py                      # 1,000,000 events, 100,000 runs
    uv run python bench/bench_runs_page.py --events 200000      # quicker load, 100,000 runs
    uv run python bench/bench_runs_page.py --keep               # keep the data for the next run
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

# The checkout's root: bench/ is a namespace package there (as mypy names it too).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_reports import load, p95, read_env, served

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PAGE_GOAL_MS = 1000.0
PLOT_GOAL_MS = 2000.0
PAINT = (
    "() => { const p = performance.getEntriesByName('first-contentful-paint')[0];"
    " return p ? p.startTime : null; }"
)


def load_page(page: Any, url: str, plot: bool) -> tuple[float, float]:
    """One load: (first contentful paint, interactive) in ms from navigation start."""
    began = time.perf_counter()
    page.goto(url, wait_until="load")
    if plot:
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-figure]')]"
            ".every(d => d.dataset.ready === 'true')",
            timeout=60_000,
        )
    interactive = (time.perf_counter() - began) * 1000
    paint = page.evaluate(PAINT)
    return (paint if paint is not None else interactive), interactive


def timed_loads(
    page: Any, url: str, plot: bool, loads: int, before: Callable[[], object] = lambda: None
) -> tuple[list[float], list[float]]:
    """``loads`` loads of ``url``, each after ``before()``: their paints and readies in ms."""
    paints, readies = [], []
    for _ in range(loads):
        before()
        paint, ready = load_page(page, url, plot)
        paints.append(paint)
        readies.append(ready)
    return paints, readies


def page_row(name: str, paints: list, readies: list, goal: float, cold: str = "") -> bool:
    """Print a page's p50/p95 of paint and ready (then ``cold``); True if p95 ready > ``goal``."""
    over = p95(readies) > goal
    print(
        f"{name:<40} {statistics.median(paints):10.0f} {p95(paints):10.0f}"
        f" {statistics.median(readies):10.0f} {p95(readies):10.0f}"
        f"{cold}{'  <-- over goal' if over else ''}",
        flush=True,
    )
    return over


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events to load")
    parser.add_argument("--runs", type=int, default=100_000, help="SnakeLab runs to load")
    parser.add_argument("--loads", type=int, default=10, help="timed loads per page")
    parser.add_argument("--keep", action="store_true", help="keep the bench databases")
    parser.add_argument(
        "--skip", action="append", default=[], help="skip pages whose path starts with this"
    )
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    env = read_env()
    loaded = load(env, args.events, args.runs)
    print(f"data: {loaded.events:,} events, {loaded.runs:,} runs", flush=True)
    failures: list[str] = []
    with served(env, args.keep) as (url, startup):
        print(f"ax3l-reports ready in {startup:.1f} s")
        with httpx.Client(base_url=url, timeout=120) as client:
            began = time.perf_counter()
            first = client.get("/api/runs?limit=1")
            first.raise_for_status()
            print(
                f"runs table built on the first request: {time.perf_counter() - began:.2f} s"
                f" ({first.json()['total']:,} runs)"
            )
            began = time.perf_counter()
            client.get("/api/plots/importance").raise_for_status()
            print(f"importance (Optuna, first request): {time.perf_counter() - began:.2f} s")
            seed = client.get("/api/runs?limit=1&sort=id&order=asc").json()["runs"][0]["seed"]
            pages = [
                ("/", "/", True),
                ("/runs", "/runs", False),
                (
                    f"/runs?status=completed&seed={seed}",
                    f"/runs?status=completed&seed={seed}",
                    False,
                ),
                ("/plots/slice (every run)", "/plots/slice", True),
                ("/plots/history (every run)", "/plots/history", True),
                ("/experiment-highscores", "/experiment-highscores", True),
                ("/proposers", "/proposers", False),
            ]
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
                try:
                    print(
                        f"\n{'page':<40} {'paint p50':>10} {'paint p95':>10}"
                        f" {'ready p50':>10} {'ready p95':>10} {'cold':>8}  (ms)"
                    )
                    for name, path, plot in pages:
                        if any(path.startswith(prefix) for prefix in args.skip):
                            continue
                        context = browser.new_context(viewport={"width": 1400, "height": 1000})
                        page = context.new_page()
                        _, cold = load_page(page, url + path, plot)
                        paints, readies = timed_loads(page, url + path, plot, args.loads)
                        context.close()
                        goal = PLOT_GOAL_MS if plot else PAGE_GOAL_MS
                        if page_row(name, paints, readies, goal, f" {cold:8.0f}"):
                            failures.append(name)
                finally:
                    browser.close()

            print()
            for label, path in (
                ("CSV of every run", "/api/runs/export.csv"),
                ("Parquet of every run", "/api/runs/export.parquet"),
                (
                    "CSV, completed runs of one seed",
                    f"/api/runs/export.csv?status=completed&seed={seed}",
                ),
            ):
                times, size = [], 0
                for _ in range(3):
                    began = time.perf_counter()
                    reply = client.get(path)
                    reply.raise_for_status()
                    times.append(time.perf_counter() - began)
                    size = len(reply.content)
                print(
                    f"{label:<40} {statistics.median(times) * 1000:8.0f} ms  {size / 1e6:6.2f} MB"
                )
    print("\nall goals met" if not failures else f"\nover goal: {', '.join(failures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
