"""A golden confirmed on more seeds (``AX3L_PROMOTION=confirm``) shows its mean and its run per
seed on the golden-configurations and high-score pages, a golden of the single mode exactly as
before; the confirmation events read as sentences in the event log, their markup escaped.

Over real SnakeLab rows (the first six runs of the user's CSV) and a history written through
``EventLog``: a seeding golden, a confirmation that promotes run 4, its golden, and a hostile
confirmation whose run id and problem are markup."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from statistics import mean

import pytest
from headless_browser import have_chromium
from playwright.sync_api import Browser, Page
from reports_history import RealRun, insert_runs, read_runs
from reports_testing import Server, private_databases, reports_server

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.event_models import (
    GoldenConfigCreated,
    PromotionConfirmationDecided,
    PromotionConfirmationStarted,
    SimulationSubmitted,
)
from ax3l.testing.databases import TestDatabases

SEEDS = [1970, 1001971, 1001972]
HOSTILE_RUN = "<script>window.__pwned=1</script>"
HOSTILE_PROBLEM = '<img src=x onerror="window.__pwned=1"> ended without a score'
MALFORMED = {"seeds": "1970", "candidate_mean": "high", "decision": ["promoted"]}


@dataclass
class Confirmed:
    """The written history: the plain golden's and the confirmed golden's event ids, and the
    confirmed golden's runs per seed (run, score), the current seed first."""

    dbs: TestDatabases
    plain_event: int
    confirmed_event: int
    runs: list[tuple[RealRun, int]]
    golden_runs: list[RealRun]

    @property
    def mean_score(self) -> float:
        return mean(score for _, score in self.runs)


async def _golden(log: EventLog, db: Database, run: RealRun, sims: int, **more) -> int:
    """A golden_config_created event of ``run`` with its experiment_highscores row."""
    async with db.transaction() as cur:
        return await log.write(
            cur,
            GoldenConfigCreated(
                run_id=run.run_id,
                config=cached_schema(None).unflatten(run.flat),
                high_score=run.high_score,
                seed=SEEDS[0],
                simulations=sims,
                **more,
            ),
            process_id=run.run_id,
            highscore=HighscoreRow(sims, run.high_score, SEEDS[0]),
        )


async def _write_history(dbs: TestDatabases, runs: list[RealRun]) -> Confirmed:
    """Seeding golden run 1 (38); run 4 (40) beats it, is confirmed with runs 5 and 2 against
    the golden's runs 3 and 6, and becomes the confirmed golden; then a hostile confirmation."""
    first, candidate = runs[0], runs[3]
    candidate_runs = [candidate, runs[4], runs[1]]
    golden_runs = [first, runs[2], runs[5]]
    schema = cached_schema(None)
    async with Database(dbs.settings()) as db:
        log = EventLog(db)
        plain = await _golden(
            log, db, first, 1, reason="Initial configuration (schema defaults).", kind="seeding"
        )
        await log.log(
            PromotionConfirmationStarted(
                candidate_run_id=candidate.run_id,
                golden_run_id=first.run_id,
                golden_event_id=plain,
                seed=SEEDS[0],
                seeds=SEEDS[1:],
                candidate_high_score=candidate.high_score,
                golden_high_score=first.high_score,
                candidate_config=schema.unflatten(candidate.flat),
                golden_config=schema.unflatten(first.flat),
                parameter="batch_size",
                index=2,
            ),
            process_id=candidate.run_id,
            parameter="batch_size",
        )
        for run in candidate_runs[1:] + golden_runs[1:]:
            await log.log(
                SimulationSubmitted(run_id=run.run_id, purpose="confirmation"),
                process_id=run.run_id,
            )
        scores = [run.high_score for run in candidate_runs]
        await log.log(
            PromotionConfirmationDecided(
                candidate_run_id=candidate.run_id,
                golden_run_id=first.run_id,
                seeds=SEEDS,
                candidate_scores=scores,
                golden_scores=[run.high_score for run in golden_runs],
                candidate_runs=[run.run_id for run in candidate_runs],
                golden_runs=[run.run_id for run in golden_runs],
                candidate_mean=float(mean(scores)),
                golden_mean=float(mean(run.high_score for run in golden_runs)),
                decision="promoted",
            ),
            process_id=candidate.run_id,
        )
        confirmed = await _golden(
            log,
            db,
            candidate,
            6,
            reason="High score: 38 < 40; training.batch_size: 24 -> 32; confirmed.",
            kind="promotion",
            confirmation_seeds=SEEDS,
            confirmation_scores=scores,
            confirmation_runs=[run.run_id for run in candidate_runs],
            mean_high_score=float(mean(scores)),
        )
        await log.log(PromotionConfirmationStarted(candidate_run_id=HOSTILE_RUN, seeds=SEEDS[1:]))
        await log.log(
            PromotionConfirmationDecided(
                candidate_run_id=HOSTILE_RUN,
                candidate_scores=[41],
                decision="retained",
                problem=HOSTILE_PROBLEM,
            )
        )
        await log.log("promotion_confirmation_decided", MALFORMED)
    return Confirmed(
        dbs, plain, confirmed, [(run, run.high_score) for run in candidate_runs], golden_runs
    )


@pytest.fixture(scope="module")
def confirmed(db_env) -> Iterator[Confirmed]:
    with private_databases(db_env) as dbs:
        runs = read_runs(6)
        with closing(dbs.connect("snakelab", dbs.snakelab_db)) as connection:
            insert_runs(connection, runs, episodes_for=0)
        yield asyncio.run(_write_history(dbs, runs))


def _expected_confirmation(history: Confirmed) -> dict:
    return {
        "mean_high_score": pytest.approx(history.mean_score),
        "runs": [
            {"seed": seed, "score": score, "run_id": run.run_id}
            for seed, (run, score) in zip(SEEDS, history.runs, strict=True)
        ],
    }


async def test_the_apis_carry_a_confirmed_goldens_mean_and_runs_and_null_for_a_plain_one(
    confirmed, make_client
):
    """/api/golden-configurations and /api/highscores give the confirmed golden's mean and its
    run per seed (current seed first), and ``confirmation: null`` for the seeding golden."""
    expected = _expected_confirmation(confirmed)
    async with make_client(confirmed.dbs) as http:
        goldens = (await http.get("/api/golden-configurations")).json()["configurations"]
        points = (await http.get("/api/highscores")).json()["points"]
    by_event = {g["event_id"]: g for g in goldens}
    assert by_event[confirmed.confirmed_event]["confirmation"] == expected
    assert by_event[confirmed.plain_event]["confirmation"] is None
    by_point = {p["event_id"]: p for p in points}
    assert by_point[confirmed.confirmed_event]["confirmation"] == expected
    assert by_point[confirmed.plain_event]["confirmation"] is None


async def test_the_event_log_words_confirmations_and_escapes_their_markup(confirmed, make_client):
    """Both confirmation events read as sentences; a run id and a problem holding markup show
    as text, and a malformed content shows as its (escaped) JSON."""
    candidate = confirmed.runs[0][0]
    async with make_client(confirmed.dbs) as http:
        events = (await http.get("/api/events", params={"category": "Configuration"})).json()
        page = (await http.get("/events", params={"category": "Configuration"})).text
        submitted = (await http.get("/api/events", params={"event": "simulation_submitted"})).json()
    said = [e["summary"] for e in events["events"]]
    assert (
        f"Confirming run {candidate.run_id[:8]} (40 > 38 on seed 1970) against golden run"
        f" {confirmed.golden_runs[0].run_id[:8]}: both run on seeds 1001971, 1001972"
    ) in said
    assert (
        "Confirmation: candidate mean 38.3 (40, 38, 37) vs golden mean 38.0 (38, 37, 39)"
        " over seeds 1970, 1001971, 1001972: promoted"
    ) in said
    assert "Confirming run <script> against the golden: both run on seeds 1001971, 1001972" in said
    assert f"Confirmation: candidate (41): golden retained; {HOSTILE_PROBLEM}" in said
    assert json.dumps(MALFORMED) in said
    assert "<script>window" not in page and "<script> against" not in page
    assert "<img src=x" not in page
    assert "Confirming run &lt;script&gt; against the golden" in page
    assert "&lt;img src=x onerror=" in page
    assert {e["summary"] for e in submitted["events"]} >= {
        f"Run {run.run_id[:8]} submitted for a promotion's confirmation"
        for run, _ in confirmed.runs[1:]
    }


# -- In a browser --------------------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(not have_chromium(), reason="Debian's chromium is needed")


@pytest.fixture(scope="module")
def server(confirmed, tmp_path_factory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("reports") / "reports.log"
    with reports_server(confirmed.dbs, log) as running:
        yield running


@pytest.fixture
def page(browser: Browser) -> Iterator[tuple[Page, list[str]]]:
    """A page and the problems it met (script errors, console errors, failed responses)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    p = context.new_page()
    p.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    p.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    p.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None,
    )
    try:
        yield p, problems
    finally:
        context.close()


def _runs_listed(row) -> list[str]:
    return [
        " ".join(text.split()) for text in row.locator(".confirmation-runs li").all_inner_texts()
    ]


def _listed(history: Confirmed) -> list[str]:
    return [
        f"{seed} → {score} → {run.run_id[:8]}"
        for seed, (run, score) in zip(SEEDS, history.runs, strict=True)
    ]


@needs_chromium
def test_golden_page_shows_the_confirmed_mean_and_runs_and_nothing_for_a_plain_golden(
    server, confirmed, page, test_output_dir
):
    """The confirmed golden's row shows its mean under its score and seed → score → run for
    each seed, each run a link to its page; the seeding golden's row shows its run and score
    only."""
    p, problems = page
    p.goto(server.url + "/golden-configurations")
    row = p.locator(f"#golden-table tr[data-event-id='{confirmed.confirmed_event}']")
    assert row.locator(".confirmation-mean").inner_text() == "mean 38.3"
    assert _runs_listed(row) == _listed(confirmed)
    plain = p.locator(f"#golden-table tr[data-event-id='{confirmed.plain_event}']")
    assert plain.locator(".confirmation-mean, .confirmation-runs").count() == 0
    first = confirmed.golden_runs[0]
    assert plain.locator("td").nth(1).inner_text() == first.run_id[:8]
    assert plain.locator("td").nth(2).inner_text() == str(first.high_score)
    p.screenshot(path=str(test_output_dir / "golden-configurations-confirmed.png"), full_page=True)
    run, score = confirmed.runs[2]
    with p.expect_navigation():
        row.locator(".confirmation-runs a").nth(2).click()
    assert p.url.endswith(f"/simulations/{run.run_id}")
    assert p.locator("#run-score").inner_text() == str(score)
    assert problems == []


@needs_chromium
def test_highscore_page_shows_the_confirmed_mean_and_runs(server, confirmed, page, test_output_dir):
    """The accepted-scores table shows the confirmed golden's mean and its runs per seed, the
    plot's hover its mean over the seeds; the seeding golden's row is as before."""
    p, problems = page
    p.goto(server.url + "/experiment-highscores")
    p.wait_for_selector("#highscores-plot[data-ready=true]", timeout=15000)
    rows = p.locator("#highscores-table tbody tr")
    assert rows.count() == 2
    newest, oldest = rows.nth(0), rows.nth(1)
    assert newest.locator(".confirmation-mean").inner_text() == "mean 38.3"
    assert _runs_listed(newest) == _listed(confirmed)
    links = newest.locator(".confirmation-runs a").evaluate_all("as => as.map(a => a.pathname)")
    assert links == [f"/simulations/{run.run_id}" for run, _ in confirmed.runs]
    assert oldest.locator(".confirmation-mean, .confirmation-runs").count() == 0
    assert oldest.locator("td").nth(1).inner_text() == str(confirmed.golden_runs[0].high_score)
    figure = json.loads(p.locator("#highscores-figure").text_content() or "{}")
    hovers = figure["data"][0]["text"]
    assert "Mean: 38.3 over seeds 1970, 1001971, 1001972" in hovers[1]
    assert "Mean" not in hovers[0]
    p.screenshot(path=str(test_output_dir / "experiment-highscores-confirmed.png"), full_page=True)
    assert problems == []


@needs_chromium
def test_hostile_confirmation_shows_as_text_and_never_runs(server, page):
    """A confirmation whose run id and problem are markup shows them as text in the event log
    and on its detail page, where the run link is escaped too; nothing runs."""
    p, problems = page
    p.goto(server.url + "/events?event=promotion_confirmation_started")
    texts = p.locator("#events td.summary summary").all_inner_texts()
    assert "Confirming run <script> against the golden: both run on seeds 1001971, 1001972" in texts
    p.goto(server.url + "/events?event=promotion_confirmation_decided")
    assert any(HOSTILE_PROBLEM in t for t in p.locator("#events td.summary").all_inner_texts())
    assert p.evaluate("() => window.__pwned === undefined")
    event_id = p.locator("#events tbody tr").nth(1).get_attribute("data-event-id")
    p.goto(f"{server.url}/events/{event_id}")
    link = p.locator("#event-facts a", has_text=HOSTILE_RUN)
    assert link.count() == 1
    assert p.evaluate("() => window.__pwned === undefined")
    assert problems == []
