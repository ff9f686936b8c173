"""The /comparison page in headless Chromium and /api/comparison, over stored comparison rows."""

from __future__ import annotations

import json
import statistics
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, sync_playwright
from reports_testing import Server, private_databases, reports_server

from ax3l.shared.testing.plugin import TestDatabases

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
BUDGET = 6
# (proposer, repeat, best-so-far curve); the repeats of a proposer differ in shape and length.
CURVES: list[tuple[str, int, list[int | None]]] = [
    ("random", 0, [37, 37, 37, 39, 39, 39]),
    ("random", 1, [None, 30, 35, 35, 40, 40]),
    ("random", 2, [41, 41, 41, 41, 41, 41]),
    ("random", 3, [35, 36, 36, 36, 38, 42]),
    ("tpe", 0, [37, 44, 44, 44, 46, 46]),
    ("tpe", 1, [40, 40, 43, 43, 43, 43]),
    ("tpe", 2, [41, 41, 41, 45, 45, 45]),
    ("tpe", 3, [35, 35, 42, 42, 42, 44]),
]
HOSTILE = "<script>window.pwned = 1</script>"


@pytest.fixture(scope="module")
def comparison(db_env) -> Iterator[TestDatabases]:
    """One finished comparison (random and tpe, four repeats each, a failed tpe repeat)."""
    with private_databases(db_env) as dbs:
        conn = dbs.connect("ax3l", dbs.ax3l_db)
        now = datetime.now(UTC).replace(tzinfo=None)
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "INSERT INTO comparisons (started_at, finished_at, state, proposers, repeats,"
                    " budget, wall_seconds, content) VALUES (%s, %s, 'partial', 'random,tpe', 5,"
                    " %s, 321.5, %s)",
                    (now, now, BUDGET, json.dumps({"seeds": [1970, 1974]})),
                )
                comparison_id = cur.lastrowid
                for proposer, index, curve in CURVES:
                    cur.execute(
                        "INSERT INTO comparison_repeats (comparison_id, proposer, repeat_index,"
                        " seed, state, runs, best_score, best_so_far, accepted_proposals,"
                        " model_turns, wasted_turns, wall_seconds, finished_at, content)"
                        " VALUES (%s, %s, %s, %s, 'finished', %s, %s, %s, 5, 0, %s, 10.5, %s,"
                        " %s)",
                        (
                            comparison_id, proposer, index, 1970 + index, len(curve), curve[-1],
                            json.dumps(curve), index if proposer == "tpe" else 0, now,
                            json.dumps({"scores": curve}),
                        ),
                    )  # fmt: skip
                cur.execute(
                    "INSERT INTO comparison_repeats (comparison_id, proposer, repeat_index, seed,"
                    " state, runs, best_score, best_so_far, accepted_proposals, model_turns,"
                    " wasted_turns, wall_seconds, finished_at, content) VALUES (%s, 'tpe', 4,"
                    " 1974, 'failed', 0, NULL, '[]', 0, 0, 0, 1.0, %s, %s)",
                    (comparison_id, now, json.dumps({"error": HOSTILE})),
                )
        finally:
            conn.close()
        yield dbs


@pytest.fixture(scope="module")
def server(comparison, tmp_path_factory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("reports") / "reports.log"
    with reports_server(comparison, log) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is needed")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _stored(dbs: TestDatabases) -> dict[str, list[list[int | None]]]:
    """The finished repeats' curves as stored, per proposer."""
    conn = dbs.connect("ax3l", dbs.ax3l_db)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT proposer, best_so_far FROM comparison_repeats WHERE state = 'finished'"
                " ORDER BY proposer, repeat_index"
            )
            found: dict[str, list[list[int | None]]] = {}
            for proposer, curve in cur.fetchall():
                found.setdefault(proposer, []).append(json.loads(curve))
            return found
    finally:
        conn.close()


def _expected(curves: list[list[int | None]]) -> dict[str, list[Any]]:
    """Median and 2.5/97.5 percentiles at each run count, by the standard library."""
    x, median, low, high = [], [], [], []
    for k in range(BUDGET):
        values = [v for c in curves if (v := c[k]) is not None]
        cuts = statistics.quantiles(values, n=40, method="inclusive")
        x.append(k + 1)
        median.append(statistics.median(values))
        low.append(cuts[0])
        high.append(cuts[-1])
    return {"x": x, "median": median, "low": low, "high": high}


def test_comparison_plot_points_and_table_are_the_stored_results(
    server, comparison, browser, test_output_dir
):
    """Each proposer's median line and band are the stored repeats' median and 2.5/97.5
    percentiles at every run count; the table shows the budget's figures and P(beats random);
    picking a score recomputes the runs to reach it; a stored error shows as text."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    problems: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    try:
        page.goto(server.url + "/proposers")
        page.click("#comparison-link a")
        page.wait_for_selector("#comparison-plot[data-ready=true]", timeout=15000)
        traces = page.evaluate(
            "() => document.getElementById('comparison-plot').data.map(t => ({name: t.name,"
            " x: Array.from(t.x), y: Array.from(t.y)}))"
        )
        by_name = {t["name"]: t for t in traces}
        stored = _stored(comparison)
        for proposer, curves in stored.items():
            expected = _expected(curves)
            for suffix, key in (("median", "median"), ("2.5%", "low"), ("97.5%", "high")):
                trace = by_name[f"{proposer} {suffix}"]
                assert trace["x"] == expected["x"]
                assert trace["y"] == pytest.approx(expected[key]), (proposer, suffix)

        finals = {
            p: [v for c in curves if (v := c[-1]) is not None] for p, curves in stored.items()
        }
        tpe_row = page.locator('#comparison-table tr[data-proposer="tpe"]')
        assert tpe_row.locator(".final-median").text_content() == (
            f"{statistics.median(finals['tpe']):.1f}"
        )
        wins = sum(
            1.0 if a > b else 0.5 if a == b else 0.0
            for a in finals["tpe"]
            for b in finals["random"]
        )
        beats = wins / (len(finals["tpe"]) * len(finals["random"]))
        assert tpe_row.locator(".p-beats").text_content() == f"{beats:.2f}"
        assert "(1 failed)" in (tpe_row.text_content() or "")
        # Default score to reach: random's median best at the budget (40.5), rounded up.
        assert page.locator("#target-input").input_value() == "41.0"
        page.screenshot(path=str(test_output_dir / "comparison.png"), full_page=True)

        page.fill("#target-input", "44")
        page.click("form.filters button[type=submit]")
        page.wait_for_selector("#comparison-plot[data-ready=true]", timeout=15000)
        assert "target=44" in page.url
        # tpe reaches 44 after 2, never, 4, 6 runs: the median of 2, 4, 6, inf is 5.
        assert tpe_row.locator(".to-target").text_content() == "5.0 (3 of 4 reached)"
        random_row = page.locator('#comparison-table tr[data-proposer="random"]')
        assert random_row.locator(".to-target").text_content() == "not reached (0 of 4 reached)"

        page.click("#repeats-details summary")
        assert HOSTILE in (page.locator("#repeats-table").text_content() or "")
        assert page.evaluate("() => window.pwned") is None
        assert problems == []
    finally:
        context.close()


def test_comparison_api_matches_the_page(server, comparison):
    """/api/comparison gives the same curves, P(beats random) and the picked target."""
    with urllib.request.urlopen(server.url + "/api/comparison?target=44", timeout=10) as reply:
        found = json.loads(reply.read())
    assert found["target"] == 44.0 and found["comparison"]["budget"] == BUDGET
    by_name = {p["proposer"]: p for p in found["proposers"]}
    expected = _expected(_stored(comparison)["tpe"])
    assert [p["median"] for p in by_name["tpe"]["curve"]] == pytest.approx(expected["median"])
    assert by_name["tpe"]["median_simulations_to_target"] == 5.0
    assert by_name["random"]["p_beats_random"] is None
    assert by_name["tpe"]["wasted_per_accepted"] == pytest.approx(6 / 20)
    assert [r["state"] for r in found["repeats"]].count("failed") == 1
