"""The /comparison page in headless Chromium and /api/comparison, over stored comparison rows."""

from __future__ import annotations

import json
import statistics
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from typing import Any

import pytest
from headless_browser import plotted_traces
from reports_testing import Server, private_databases, reports_server
from stored_rows import stored_rows

from ax3l.testing.databases import TestDatabases

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
    ("llm+tpe", 0, [37, 38, 45, 45, 45, 47]),
    ("llm+tpe", 1, [40, 40, 40, 41, 44, 44]),
]
# llm+tpe's accepted proposals by who proposed them, per repeat (as ax3l-compare stores them).
PROPOSED_BY = [
    {"model": 2, "tpe": 3, "model_matched_tpe": 1},
    {"model": 1, "tpe": 4, "model_matched_tpe": 1},
]
HOSTILE = "<script>window.pwned = 1</script>"


def _content(proposer: str, index: int, curve: list[int | None]) -> dict[str, Any]:
    """A repeat's content: wasted turns split by entry kind (random never wasted one and never
    proposed a continuous value), and who proposed for llm+tpe."""
    content: dict[str, Any] = {"scores": curve}
    if proposer == "random":
        content["by_kind"] = {"finite": {"accepted": 5, "wasted": 0}}
    else:
        content["by_kind"] = {
            "finite": {"accepted": 3, "wasted": (index + 1) // 2},
            "continuous": {"accepted": 2, "wasted": index // 2},
        }
    if proposer == "llm+tpe":
        content["proposed_by"] = PROPOSED_BY[index]
    return content


@pytest.fixture(scope="module")
def comparison(db_env) -> Iterator[TestDatabases]:
    """One finished comparison (random and tpe, four repeats each, a failed tpe repeat; two
    repeats of llm+tpe)."""
    with private_databases(db_env) as dbs:
        now = datetime.now(UTC).replace(tzinfo=None)
        with closing(dbs.connect("ax3l", dbs.ax3l_db)) as conn, conn.cursor() as cur:
            cur.execute(
                "INSERT INTO comparisons (started_at, finished_at, state, proposers, repeats,"
                " budget, wall_seconds, content) VALUES (%s, %s, 'partial',"
                " 'random,tpe,llm+tpe', 5, %s, 321.5, %s)",
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
                        json.dumps(curve), 0 if proposer == "random" else index, now,
                        json.dumps(_content(proposer, index, curve)),
                    ),
                )  # fmt: skip
            cur.execute(
                "INSERT INTO comparison_repeats (comparison_id, proposer, repeat_index, seed,"
                " state, runs, best_score, best_so_far, accepted_proposals, model_turns,"
                " wasted_turns, wall_seconds, finished_at, content) VALUES (%s, 'tpe', 4,"
                " 1974, 'failed', 0, NULL, '[]', 0, 0, 0, 1.0, %s, %s)",
                (comparison_id, now, json.dumps({"error": HOSTILE})),
            )
        yield dbs


@pytest.fixture(scope="module")
def server(comparison, tmp_path_factory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("reports") / "reports.log"
    with reports_server(comparison, log) as running:
        yield running


def _stored(dbs: TestDatabases) -> dict[str, list[list[int | None]]]:
    """The finished repeats' curves as stored, per proposer."""
    found: dict[str, list[list[int | None]]] = {}
    for proposer, curve in stored_rows(
        dbs,
        "SELECT proposer, best_so_far FROM comparison_repeats WHERE state = 'finished'"
        " ORDER BY proposer, repeat_index",
        user="ax3l",
    ):
        found.setdefault(proposer, []).append(json.loads(curve))
    return found


def _stored_turns(dbs: TestDatabases) -> dict[str, dict[str, Any]]:
    """Per proposer, from the finished repeats as stored: wasted per accepted on finite and on
    continuous entries (None without accepted ones) and, where stored, who proposed."""
    rows = stored_rows(
        dbs,
        "SELECT proposer, accepted_proposals, content FROM comparison_repeats"
        " WHERE state = 'finished'",
        user="ax3l",
    )
    sums: dict[str, dict[str, int]] = {}
    for proposer, accepted, text in rows:
        content = json.loads(text)
        mine = sums.setdefault(proposer, {"accepted": 0})
        mine["accepted"] += accepted
        for kind, turns in content.get("by_kind", {}).items():
            for what, count in turns.items():
                mine[f"{kind} {what}"] = mine.get(f"{kind} {what}", 0) + count
        for role, count in content.get("proposed_by", {}).items():
            mine[role] = mine.get(role, 0) + count
    found: dict[str, dict[str, Any]] = {}
    for proposer, mine in sums.items():
        found[proposer] = {
            kind: mine[f"{kind} wasted"] / mine[f"{kind} accepted"]
            if mine.get(f"{kind} accepted")
            else None
            for kind in ("finite", "continuous")
        }
        found[proposer]["proposed"] = (
            (mine["model"], mine["accepted"], mine["model_matched_tpe"])
            if "model" in mine
            else None
        )
    return found


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
        by_name = plotted_traces(page, "comparison-plot")
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
        turns = _stored_turns(comparison)
        for proposer, expected_turns in turns.items():
            row = page.locator(f'#comparison-table tr[data-proposer="{proposer}"]')
            for kind in ("finite", "continuous"):
                per = expected_turns[kind]
                shown = row.locator(f".wasted-{kind}").text_content() or ""
                assert shown.split(" ")[0] == ("–" if per is None else f"{per:.3f}"), proposer
            proposed = expected_turns["proposed"]
            assert row.locator(".model-proposals").text_content() == (
                "–" if proposed is None else "{} of {} ({} matched)".format(*proposed)
            )
        # The hybrid's model made 3 of its 10 accepted proposals, 2 of them TPE's suggestions.
        assert turns["llm+tpe"]["proposed"] == (3, 10, 2)
        assert turns["random"]["continuous"] is None
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
        repeat = page.locator('#repeats-table tr[data-proposer="llm+tpe"][data-repeat="1"]')
        assert repeat.locator(".model-proposals").text_content() == "1 of 5 (1 matched)"
        assert repeat.locator(".wasted-finite").text_content() == "0.333"
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
    for proposer, turns in _stored_turns(comparison).items():
        summary = by_name[proposer]
        for kind in ("finite", "continuous"):
            per = turns[kind]
            assert summary[f"wasted_per_accepted_{kind}"] == (
                None if per is None else pytest.approx(per)
            )
        proposed = turns["proposed"]
        assert (
            summary["model_proposals"],
            summary["accepted_proposals"],
            summary["model_matched_tpe"],
        ) == (proposed or (None, summary["accepted_proposals"], None))
    assert by_name["llm+tpe"]["tpe_proposals"] == 7 and by_name["tpe"]["tpe_proposals"] is None
    hybrid = [r for r in found["repeats"] if r["proposer"] == "llm+tpe"]
    assert [(r["model_proposals"], r["model_matched_tpe"]) for r in hybrid] == [(2, 1), (1, 1)]
    assert hybrid[1]["by_kind"]["continuous"] == {"accepted": 2, "wasted": 0}
