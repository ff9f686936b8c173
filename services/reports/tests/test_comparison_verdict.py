"""The held-out verdict of /comparison and /api/comparison, over stored re-test rows: every
figure is recomputed here from the rows with the standard library (the bootstrap intervals from
the same seeded draws, one resample at a time), never with ``comparison_stats``."""

from __future__ import annotations

import json
import statistics
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from reports_testing import Server, private_databases, reports_server
from stored_rows import stored_rows

from ax3l.shared import comparison_stats
from ax3l.testing.databases import TestDatabases

BUDGET = 6
SEEDS = [1_001_970, 1_001_971, 1_001_972]
PROPOSERS = ("default", "random", "tpe")
# (proposer, repeat): best observed at the budget, held-out scores after 3 and after 6 runs
REPEATS: dict[tuple[str, int], tuple[int, list[int], list[int]]] = {
    ("default", 0): (41, [38, 40, 37], [38, 40, 37]),
    ("default", 1): (37, [38, 40, 37], [38, 40, 37]),
    ("default", 2): (42, [38, 40, 37], [38, 40, 37]),
    ("default", 3): (39, [38, 40, 37], [38, 40, 37]),
    ("default", 4): (44, [38, 40, 37], [38, 40, 37]),
    ("random", 0): (47, [35, 36, 30], [33, 35, 31]),
    ("random", 1): (46, [39, 41, 38], [40, 42, 39]),
    ("random", 2): (49, [37, 38, 36], [29, 30, 28]),
    ("random", 3): (45, [36, 39, 40], [41, 43, 40]),
    ("random", 4): (48, [40, 38, 39], [38, 36, 39]),
    ("tpe", 0): (45, [39, 41, 38], [40, 41, 39]),
    ("tpe", 1): (44, [38, 40, 37], [39, 42, 38]),
    ("tpe", 2): (46, [40, 41, 39], [41, 40, 42]),
    ("tpe", 3): (43, [37, 40, 38], [38, 40, 37]),
    ("tpe", 4): (45, [39, 38, 40], [42, 41, 40]),
}
EXPECTED_SCORE = {"default": 39.17, "random": 37.5, "tpe": 40.25}


@pytest.fixture(scope="module")
def comparison(db_env) -> Iterator[TestDatabases]:
    """A finished comparison with re-tests after 3 and 6 runs on three held-out seeds; a
    re-test of random's repeat 2 failed once and ran again; and an older comparison (the
    first) without any re-test."""
    with private_databases(db_env) as dbs:
        now = datetime.now(UTC).replace(tzinfo=None)
        with closing(dbs.connect("ax3l", dbs.ax3l_db)) as conn, conn.cursor() as cur:
            cur.execute(
                "INSERT INTO comparisons (started_at, finished_at, state, proposers, repeats,"
                " budget, wall_seconds, content) VALUES (%s, %s, 'finished', 'random,tpe', 1,"
                " %s, 10, %s)",
                (now, now, BUDGET, json.dumps({"seeds": [1970, 1970]})),
            )
            old = cur.lastrowid
            for proposer in ("random", "tpe"):
                _repeat(cur, old, proposer, 0, 44, None, now)
            retest = {"seeds": SEEDS, "at": [3, BUDGET], "control": True}
            cur.execute(
                "INSERT INTO comparisons (started_at, finished_at, state, proposers, repeats,"
                " budget, wall_seconds, content) VALUES (%s, %s, 'finished', %s, 5, %s, 60,"
                " %s)",
                (now, now, ",".join(PROPOSERS), BUDGET, json.dumps({"retest": retest})),
            )
            comparison_id = cur.lastrowid
            for (proposer, index), (best, early, final) in REPEATS.items():
                _repeat(cur, comparison_id, proposer, index, best, proposer, now)
                for at_runs, scores in ((3, early), (BUDGET, final)):
                    for seed, score in zip(SEEDS, scores, strict=True):
                        failed = ["f" * 36] if (proposer, index, seed) == (
                            "random", 2, SEEDS[0]
                        ) else []  # fmt: skip
                        cur.execute(
                            "INSERT INTO comparison_retests (comparison_id, proposer,"
                            " repeat_index, at_runs, seed, run_id, score, failed_run_ids)"
                            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                            (
                                comparison_id, proposer, index, at_runs, seed,
                                f"{index:08d}-0000-0000-0000-{seed:012d}", score,
                                json.dumps(failed),
                            ),
                        )  # fmt: skip
        yield dbs


def _repeat(
    cur: Any, comparison_id: int, proposer: str, index: int, best: int, pick: str | None, now: Any
) -> None:
    runs = 1 if proposer == "default" else BUDGET
    curve = [best] * runs
    content: dict[str, Any] = {"scores": curve}
    if pick is not None:
        content["recommendations"] = [
            {"at_runs": at, "golden_run_id": "g", "config": {"seed": 1970 + index},
             "expected_score": EXPECTED_SCORE[pick] + 0.1 * index}
            for at in (3, BUDGET)
        ]  # fmt: skip
    cur.execute(
        "INSERT INTO comparison_repeats (comparison_id, proposer, repeat_index, seed, state,"
        " runs, best_score, best_so_far, accepted_proposals, model_turns, wasted_turns,"
        " wall_seconds, finished_at, content) VALUES (%s, %s, %s, %s, 'finished', %s, %s, %s,"
        " %s, 0, 0, 1.0, %s, %s)",
        (comparison_id, proposer, index, 1970 + index, runs, best, json.dumps(curve),
         runs - 1, now, json.dumps(content)),
    )  # fmt: skip


@pytest.fixture(scope="module")
def server(comparison, tmp_path_factory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("reports") / "reports.log"
    with reports_server(comparison, log) as running:
        yield running


# -- the figures, from the stored rows, by the standard library ----------------------------


def _stored(dbs: TestDatabases) -> dict[str, dict[int, dict[str, Any]]]:
    """Per proposer and repeat, as stored: final held-out scores, best observed, expected."""
    found: dict[str, dict[int, dict[str, Any]]] = {}
    for proposer, index, curve, content in stored_rows(
        dbs,
        "SELECT r.proposer, r.repeat_index, r.best_so_far, r.content FROM comparison_repeats r"
        " WHERE r.comparison_id = (SELECT MAX(comparison_id) FROM comparisons)",
        user="ax3l",
    ):
        picks = json.loads(content)["recommendations"]
        found.setdefault(proposer, {})[index] = {
            "best": json.loads(curve)[-1],
            "expected": next(p for p in picks if p["at_runs"] == BUDGET)["expected_score"],
            "held_out": [],
        }
    for proposer, index, score in stored_rows(
        dbs,
        "SELECT proposer, repeat_index, score FROM comparison_retests WHERE at_runs = %s"
        " ORDER BY seed",
        (BUDGET,),
        user="ax3l",
    ):
        found[proposer][index]["held_out"].append(score)
    return found


def _iqm(values: list[float]) -> float:
    ordered = sorted(values)
    cut = len(ordered) // 4
    kept = ordered[cut : len(ordered) - cut]
    return sum(kept) / len(kept)


def _interval(values: list[float], statistic: Any) -> tuple[float, float]:
    """The 95% percentile bootstrap interval, one resample at a time over the same seeded
    draws as the report's, its percentiles interpolated by hand."""
    rng = np.random.default_rng(comparison_stats.BOOTSTRAP_SEED)
    draws = rng.integers(
        0, len(values), size=(comparison_stats.BOOTSTRAP_RESAMPLES, len(values))
    ).tolist()
    spread = sorted(statistic([values[j] for j in row]) for row in draws)

    def percentile(q: float) -> float:
        position = q * (len(spread) - 1)
        low = int(position)
        upper = spread[min(low + 1, len(spread) - 1)]
        return spread[low] + (upper - spread[low]) * (position - low)

    return percentile(0.025), percentile(0.975)


def _verdict(stored: dict[str, dict[int, dict[str, Any]]]) -> dict[str, dict[str, float]]:
    found = {}
    for proposer, repeats in stored.items():
        means = [statistics.mean(r["held_out"]) for r in repeats.values()]
        low, high = _interval(means, _iqm)
        found[proposer] = {
            "iqm": _iqm(means),
            "low": low,
            "high": high,
            "mean": statistics.mean(means),
            "median": statistics.median(means),
            "best": statistics.mean(r["best"] for r in repeats.values()),
            "gap": statistics.mean(
                r["best"] - statistics.mean(r["held_out"]) for r in repeats.values()
            ),
            "expected": statistics.mean(r["expected"] for r in repeats.values()),
        }
    return found


def _pairs(stored: dict[str, dict[int, dict[str, Any]]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Every proposer against default and tpe: median difference, interval, P(A beats B)."""
    found = {}
    for a, b in (("random", "default"), ("tpe", "default"), ("random", "tpe")):
        diffs = [
            statistics.mean(stored[a][i]["held_out"]) - statistics.mean(stored[b][i]["held_out"])
            for i in sorted(stored[a])
        ]
        low, high = _interval(diffs, statistics.median)
        wins = sum(1.0 if d > 0 else 0.5 if d == 0 else 0.0 for d in diffs)
        found[a, b] = {
            "median": statistics.median(diffs),
            "low": low,
            "high": high,
            "p": wins / len(diffs),
            "repeats": len(diffs),
        }
    return found


# -- the tests ------------------------------------------------------------------------------


def test_verdict_table_and_paired_plot_are_the_stored_rows(
    server, comparison, browser, test_output_dir
):
    """The page leads with the verdict: each proposer's held-out IQM, its interval, mean,
    median, best observed, optimism gap and expected score, and each pair's median difference,
    interval and P(A beats B), as recomputed from the stored rows; the paired plot's points and
    error bars are the same; the held-out curve has a point per re-test run count."""
    context = browser.new_context(viewport={"width": 1400, "height": 1200})
    problems: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    try:
        page.goto(server.url + "/comparison")
        stored = _stored(comparison)
        headings = page.locator("h2").all_text_contents()
        assert headings[:2] == ["Held-out verdict", "Best observed while tuning"]
        for proposer, want in _verdict(stored).items():
            row = page.locator(f'#verdict-table tr[data-proposer="{proposer}"]')
            cells = {
                css: row.locator(f".{css}").text_content()
                for css in ("iqm", "iqm-interval", "held-out-mean", "held-out-median",
                            "best-observed", "optimism-gap", "expected")
            }  # fmt: skip
            assert cells == {
                "iqm": f"{want['iqm']:.2f}",
                "iqm-interval": f"{want['low']:.2f} – {want['high']:.2f}",
                "held-out-mean": f"{want['mean']:.2f}",
                "held-out-median": f"{want['median']:.2f}",
                "best-observed": f"{want['best']:.2f}",
                "optimism-gap": f"{want['gap']:.2f}",
                "expected": f"{want['expected']:.2f}",
            }, proposer
        pairs = _pairs(stored)
        for (a, b), want in pairs.items():
            row = page.locator(f'#pairs-table tr[data-a="{a}"][data-b="{b}"]')
            assert row.locator(".pair-median").text_content() == f"{want['median']:+.2f}"
            assert row.locator(".pair-interval").text_content() == (
                f"{want['low']:+.2f} – {want['high']:+.2f}"
            )
            assert row.locator(".pair-p").text_content() == f"{want['p']:.2f}"
        page.wait_for_selector("#pairs-plot[data-ready=true]", timeout=15000)
        plotted = page.evaluate(
            "() => { const t = document.getElementById('pairs-plot').data[0];"
            " return {x: Array.from(t.x), y: Array.from(t.y), plus: Array.from(t.error_x.array),"
            " minus: Array.from(t.error_x.arrayminus)}; }"
        )
        assert plotted["y"] == [f"{a} − {b}" for a, b in pairs]
        assert plotted["x"] == pytest.approx([w["median"] for w in pairs.values()])
        assert [x + plus for x, plus in zip(plotted["x"], plotted["plus"], strict=True)] == (
            pytest.approx([w["high"] for w in pairs.values()])
        )
        assert [x - minus for x, minus in zip(plotted["x"], plotted["minus"], strict=True)] == (
            pytest.approx([w["low"] for w in pairs.values()])
        )
        page.wait_for_selector("#retest-curves-plot[data-ready=true]", timeout=15000)
        curves = page.evaluate(
            "() => document.getElementById('retest-curves-plot').data"
            ".map(t => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y)}))"
        )
        tpe = next(t for t in curves if t["name"] == "tpe held-out IQM")
        early = [statistics.mean(REPEATS["tpe", i][1]) for i in range(5)]
        assert tpe["x"] == [3, BUDGET]
        assert tpe["y"] == pytest.approx([_iqm(early), _verdict(stored)["tpe"]["iqm"]])
        assert page.locator("#no-retests").count() == 0
        page.screenshot(path=str(test_output_dir / "comparison-verdict.png"), full_page=True)
        assert problems == []
    finally:
        context.close()


def test_verdict_api_matches_the_stored_rows(server, comparison):
    """/api/comparison's verdict and pairs are the recomputed figures; each repeat carries its
    held-out scores in seed order; a re-test that failed and ran again is counted once."""
    with urllib.request.urlopen(server.url + "/api/comparison", timeout=10) as reply:
        found = json.loads(reply.read())
    stored = _stored(comparison)
    assert found["has_retests"] is True and found["retest_seeds"] == SEEDS
    for row in found["verdict"]:
        want = _verdict(stored)[row["proposer"]]
        assert (row["iqm"]["value"], row["iqm"]["low"], row["iqm"]["high"]) == (
            pytest.approx(want["iqm"]),
            pytest.approx(want["low"]),
            pytest.approx(want["high"]),
        )
        assert row["held_out_mean"] == pytest.approx(want["mean"])
        assert row["optimism_gap"] == pytest.approx(want["gap"])
        assert row["expected_score"] == pytest.approx(want["expected"])
    pairs = _pairs(stored)
    assert [(p["a"], p["b"]) for p in found["pairs"]] == list(pairs)
    for p in found["pairs"]:
        want = pairs[p["a"], p["b"]]
        assert p["median_difference"] == pytest.approx(want["median"])
        assert (p["low"], p["high"]) == (pytest.approx(want["low"]), pytest.approx(want["high"]))
        assert p["p_a_beats_b"] == pytest.approx(want["p"]) and p["repeats"] == want["repeats"]
    repeat = [r for r in found["repeats"] if (r["proposer"], r["repeat_index"]) == ("random", 2)]
    assert repeat[0]["held_out"] == REPEATS["random", 2][2]
    failed = [r for r in found["retests"] if r["failed_run_ids"]]
    assert [(r["proposer"], r["repeat_index"], r["seed"]) for r in failed] == [
        ("random", 2, SEEDS[0]),
        ("random", 2, SEEDS[0]),
    ]  # one row per point re-tested, each counting one run


def test_a_comparison_without_retests_still_renders_marked_as_such(server, browser):
    """The older comparison has no verdict table: the page says so and shows the observed
    best; the API says has_retests false with an empty verdict."""
    with urllib.request.urlopen(server.url + "/api/comparison?comparison=1", timeout=10) as reply:
        found = json.loads(reply.read())
    assert found["has_retests"] is False and found["verdict"] == [] and found["pairs"] == []
    assert [p["final_median"] for p in found["proposers"]] == [44.0, 44.0]
    with closing(browser.new_context()) as context:
        page = context.new_page()
        page.goto(server.url + "/comparison?comparison=1")
        assert "No held-out verdict" in (page.locator("#no-retests").text_content() or "")
        assert page.locator("#verdict-table").count() == 0
        assert page.locator("#comparison-table tr[data-proposer='tpe']").count() == 1


def test_one_quantile_implementation_serves_the_model_leaderboard_too():
    """The leaderboard's percentiles are comparison_stats.quantile (numpy's linear method)."""
    from ax3l.reports.queries import proposers

    values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    assert proposers._percentile(values, 0.95) == float(np.quantile(values, 0.95))
    assert proposers._percentile([], 0.5) is None
