"""The model of every run on the pages: the recommendation beside the golden (dashboard, golden
page, ``/api/model/recommendation``), each tuned value's effect curve on ``/plots/importance``
(``/api/model/effects``), and races and model goldens worded as sentences, markup escaped.

Over the first 60 real SnakeLab runs of the user's CSV (their own scores, three seeds) and a
history written through ``EventLog``: a seeding golden, a race of two rounds that promotes, and
a round whose verdict is markup."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass

import pytest
from headless_browser import Watched, have_chromium
from playwright.sync_api import Browser, Page
from reports_history import RealRun, insert_runs, read_runs
from reports_testing import Server, private_databases, reports_server

from ax3l.reports.queries.run_model import CURVE_POINTS
from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.event_models import (
    GoldenConfigCreated,
    PromotionConfirmationDecided,
    PromotionConfirmationStarted,
    PromotionRaceRound,
)
from ax3l.shared.registry import TUNED_PATHS
from ax3l.testing.databases import TestDatabases

HOSTILE = '<img src=x onerror="window.__pwned=1">'
RACE_SEEDS = [1001971, 1001972, 1001973]


@dataclass
class Written:
    dbs: TestDatabases
    runs: list[RealRun]


async def _history(dbs: TestDatabases, runs: list[RealRun]) -> None:
    schema = cached_schema(None)
    first, challenger = runs[0], runs[3]
    async with Database(dbs.settings()) as db:
        log = EventLog(db)
        async with db.transaction() as cur:
            await log.write(
                cur,
                GoldenConfigCreated(
                    run_id=first.run_id,
                    config=schema.unflatten(first.flat),
                    high_score=first.high_score,
                    seed=1970,
                    simulations=1,
                    reason="Initial configuration (schema defaults).",
                    kind="seeding",
                ),
                process_id=first.run_id,
                highscore=HighscoreRow(1, first.high_score, 1970),
            )
        started = await log.log(
            PromotionConfirmationStarted(
                candidate_run_id=challenger.run_id,
                golden_run_id=first.run_id,
                seed=1970,
                seeds=[*RACE_SEEDS, 1001974],
                candidate_high_score=challenger.high_score,
                golden_high_score=first.high_score,
                policy="race",
                alpha=0.1,
            ),
            process_id=challenger.run_id,
        )
        for number, (n, verdict) in enumerate(((1, "continue"), (3, "promoted")), start=1):
            await log.log(
                PromotionRaceRound(
                    candidate_run_id=challenger.run_id,
                    round=number,
                    seeds=RACE_SEEDS[:n],
                    candidate_scores=[44, 45, 46][:n],
                    golden_scores=[40, 39, 41][:n],
                    mean_difference=[4.0, 5.0][number - 1],
                    p_value=None if n < 3 else 0.0061,
                    threshold=0.05,
                    verdict=verdict,
                ),
                process_id=challenger.run_id,
                parent_event_id=started,
            )
        await log.log(
            PromotionConfirmationDecided(
                candidate_run_id=challenger.run_id,
                seeds=RACE_SEEDS,
                candidate_scores=[44, 45, 46],
                golden_scores=[40, 39, 41],
                candidate_mean=45.0,
                golden_mean=40.0,
                decision="promoted",
                policy="race",
                mean_difference=5.0,
                p_value=0.0061,
                threshold=0.05,
            ),
            process_id=challenger.run_id,
            parent_event_id=started,
        )
        await log.log(PromotionRaceRound(round=3, verdict=HOSTILE, candidate_scores=[1]))


@pytest.fixture(scope="module")
def written(db_env) -> Iterator[Written]:
    with private_databases(db_env) as dbs:
        runs = read_runs(60)
        with closing(dbs.connect("snakelab", dbs.snakelab_db)) as connection:
            insert_runs(connection, runs, episodes_for=0)
        asyncio.run(_history(dbs, runs))
        yield Written(dbs, runs)


async def test_the_recommendation_is_an_evaluated_configuration_with_its_estimate(
    written, make_client
):
    """/api/model/recommendation: fitted to every completed run with a score, it recommends one
    of their configurations with a mean inside their scores' range and an sd below a run's
    noise, and gives the golden's estimate; the effects API has a curve per tuned value over
    its legal range."""
    async with make_client(written.dbs) as http:
        view = (await http.get("/api/model/recommendation")).json()
        effects = (await http.get("/api/model/effects")).json()
    completed = [r for r in written.runs if r.status == "completed" and r.high_score is not None]
    assert view["problem"] is None and view["runs"] == len(completed)
    assert view["seeds"] == len({r.flat["seed"] for r in completed})
    rec = view["recommendation"]
    by_id = {r.run_id: r for r in completed}
    assert rec["run_id"] in by_id
    chosen = by_id[rec["run_id"]]
    assert rec["values"] == {
        p: pytest.approx(chosen.flat[p.replace(".", "_")]) for p in TUNED_PATHS
    }
    scores = [r.high_score for r in completed]
    assert min(scores) < rec["predicted_mean"] < max(scores)
    assert 0 < rec["predicted_sd"] < view["noise_sd"]
    assert view["golden"]["run_id"] == written.runs[0].run_id
    assert [e["path"] for e in effects["effects"]] == list(TUNED_PATHS)
    schema = cached_schema(None)
    for effect in effects["effects"]:
        leaf = schema.by_path[effect["path"]]
        assert len(effect["values"]) == CURVE_POINTS
        assert effect["values"][0] == pytest.approx(leaf.minimum)
        assert effect["values"][-1] == pytest.approx(leaf.maximum)
        assert all(sd > 0 for sd in effect["sds"])
        assert len(effect["run_values"]) == len(completed)


async def test_races_and_rounds_read_as_sentences_with_markup_escaped(written, make_client):
    """The race's start, rounds and decision are sentences with their figures; a round whose
    verdict is markup shows it as text."""
    async with make_client(written.dbs) as http:
        events = (await http.get("/api/events", params={"category": "Configuration"})).json()
        page = (await http.get("/events", params={"category": "Configuration"})).text
    said = [e["summary"] for e in events["events"]]
    challenger = written.runs[3].run_id[:8]
    assert any(s.startswith(f"Racing run {challenger}") and "up to 4 more seeds" in s for s in said)
    assert (
        "Race round 1 (1 seed) (mean difference +4.00, a win needs p <= 0.05): another round"
    ) in said
    assert (
        "Race round 2 (3 seeds) (mean difference +5.00, p = 0.0061, a win needs p <= 0.05):"
        " the challenger wins"
    ) in said
    assert (
        "Race: promoted after 3 seeds, challenger mean 45.0 vs golden 40.0 (mean difference"
        " +5.00, p = 0.0061, a win needs p <= 0.05)"
    ) in said
    assert "<img src=x" not in page and "&lt;img src=x" in page


# -- In a browser --------------------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(not have_chromium(), reason="Debian's chromium is needed")


@pytest.fixture(scope="module")
def server(written, tmp_path_factory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("reports") / "reports.log"
    with reports_server(written.dbs, log) as running:
        yield running


@pytest.fixture
def page(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        yield Watched(context.new_page())
    finally:
        context.close()


def _width(p: Page) -> int:
    return int(p.evaluate("document.documentElement.scrollWidth"))


@needs_chromium
def test_the_pages_show_the_recommendation_and_the_effect_curves_on_a_phone(
    server, written, page, test_output_dir
):
    """At 390 px: the dashboard and the golden page show the recommendation (its predicted mean
    and run, the golden's estimate), /plots/importance draws nine effect curves; nothing is
    wider than the screen and no script fails."""
    p = page.page
    for path, card in (
        ("/", "#dash-recommendation"),
        ("/golden-configurations", "#golden-recommendation"),
    ):
        p.goto(server.url + path)
        text = " ".join(p.locator(card).inner_text().split())
        assert "predicted mean score over seeds" in text, text
        assert (
            p.locator(f"{card} [data-model=predicted-mean]").inner_text().replace(".", "").isdigit()
        )
        assert _width(p) <= 390, (path, _width(p))
    p.goto(server.url + "/plots/importance")
    p.wait_for_function("document.querySelectorAll('.effect .main-svg').length >= 9", timeout=20000)
    assert p.locator(".effect").count() == len(TUNED_PATHS)
    assert _width(p) <= 390, _width(p)
    p.screenshot(path=str(test_output_dir / "importance-effects.png"), full_page=True)
    assert page.problems == []
