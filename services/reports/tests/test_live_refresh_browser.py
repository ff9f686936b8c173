"""Auto-refresh in headless Chromium: the event log with ``refresh`` on updates its rows and
status bar in place (no navigation), keeps the scroll position, focus and setting, waits while
the tab is hidden, and says "not refreshed" while keeping its data when the server is gone.

The page's timers run on Playwright's clock, so a 5 s period takes no 5 s of the suite."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from typing import Any

import pytest
from headless_browser import Watched, have_chromium
from reports_history import RealRun, insert_runs, read_runs
from reports_testing import private_databases, reports_server

from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.event_models import ConversationStarted, ProposalAccepted, SimulationSubmitted
from ax3l.testing.databases import TestDatabases

pytestmark = pytest.mark.skipif(not have_chromium(), reason="Debian's chromium is needed")

PERIOD_MS = 5000


def submit_runs(dbs: TestDatabases, count: int) -> list[str]:
    """``count`` ``simulation_submitted`` events written as the loop writes them; their run ids."""
    run_ids = [str(uuid.uuid4()) for _ in range(count)]

    async def write() -> None:
        async with Database(dbs.settings()) as db:
            log = EventLog(db)
            async with db.transaction() as cur:
                for run_id in run_ids:
                    await log.write(cur, SimulationSubmitted(run_id=run_id), process_id=run_id)

    # A thread of its own: Playwright's sync API keeps an event loop running in this one.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, write()).result()
    return run_ids


def add_runs(dbs: TestDatabases, runs: list[RealRun]) -> None:
    """SnakeLab rows for ``runs``, as SnakeLab writes them."""
    with closing(dbs.connect("snakelab", dbs.snakelab_db)) as connection:
        insert_runs(connection, runs, episodes_for=0)
        connection.commit()


@pytest.fixture(scope="module")
def dbs(db_env: dict[str, str]) -> Iterator[TestDatabases]:
    with private_databases(db_env) as databases:
        yield databases


def watched_page(browser: Any, height: int = 800) -> tuple[Any, Watched, list[str]]:
    """A new browser context's page, watched for problems, with a fake clock installed and the
    URLs it navigates to collected in the list returned."""
    context = browser.new_context(viewport={"width": 1200, "height": height})
    watched = Watched(context.new_page())
    navigations: list[str] = []
    watched.page.on("framenavigated", lambda frame: navigations.append(frame.url))
    watched.page.clock.install()
    return context, watched, navigations


def test_dashboard_refresh_swaps_its_data_and_redraws_the_plot(dbs, browser, tmp_path):
    """/?refresh=5: a new run shows in the last runs, the card and the history plot (drawn
    again from the fetched figure) without a navigation."""
    runs = read_runs(limit=5)
    add_runs(dbs, runs[:3])
    with reports_server(dbs, tmp_path / "reports.log") as server:
        context, watched, navigations = watched_page(browser)
        p = watched.page
        p.goto(server.url + "/")
        with p.expect_navigation():
            p.select_option("#filter-refresh", "5")
        url = server.url + "/?refresh=5"
        assert p.url == url and navigations[-1] == url
        navigations.clear()
        points = "id => document.getElementById(id).data.reduce((n, t) => n + t.x.length, 0)"
        p.wait_for_selector("#dash-history-plot[data-ready=true]", timeout=15000)
        drawn = p.evaluate(points, "dash-history-plot")
        assert p.locator("#dash-last-runs tbody tr[data-id]").count() == 3
        p.evaluate("() => { document.getElementById('dash-history-plot').__old = true; }")

        add_runs(dbs, runs[3:4])
        with p.expect_response(lambda r: r.url == url):
            p.clock.run_for(PERIOD_MS)
        p.wait_for_function(
            "() => { const d = document.getElementById('dash-history-plot');"
            " return !d.__old && d.dataset.ready === 'true'; }",
            timeout=15000,
        )
        assert p.locator("#dash-last-runs tbody tr[data-id]").count() == 4
        assert p.locator("#dash-last-runs a[title]").first.get_attribute("title") == runs[3].run_id
        assert p.evaluate(points, "dash-history-plot") > drawn
        assert navigations == []
        assert p.input_value("#filter-refresh") == "5"

        # /runs on a phone: the table's own horizontal scroll and a half-typed filter stay.
        p.set_viewport_size({"width": 420, "height": 800})
        url = server.url + "/runs?refresh=5"
        p.goto(url)
        navigations.clear()
        assert "refresh=5" in p.locator("#runs th[data-column=seed] a").get_attribute("href")
        assert "refresh" not in p.locator("#download-csv").get_attribute("href")
        wrap = "() => document.getElementById('runs-wrap').scrollLeft"
        p.evaluate("() => { document.getElementById('runs-wrap').scrollLeft = 300; }")
        across = p.evaluate(wrap)
        assert across > 100
        p.fill("#filter-score-min", "12")
        add_runs(dbs, runs[4:])
        with p.expect_response(lambda r: r.url == url):
            p.clock.run_for(PERIOD_MS)
        p.wait_for_selector(f"#runs tr[data-run-id='{runs[4].run_id}']", state="attached")
        assert p.locator("#runs tbody tr[data-id]").count() == 5
        assert p.evaluate(wrap) == across
        assert p.input_value("#filter-score-min") == "12"
        assert p.evaluate("() => document.activeElement.id") == "filter-score-min"
        assert navigations == []
        assert watched.problems == []
        context.close()


def test_refresh_updates_the_event_log_in_place(dbs, browser, tmp_path, test_output_dir):
    """/events?refresh=5: a new event appears in place; scroll, focus, an opened row and the
    setting stay; a hidden tab waits; a stopped server leaves the rows and a notice."""
    submit_runs(dbs, 80)
    with reports_server(dbs, tmp_path / "reports.log") as server:
        context, watched, navigations = watched_page(browser, height=700)
        p = watched.page
        fetched: list[str] = []
        p.on("request", lambda r: fetched.append(r.url) if "/events" in r.url else None)
        url = server.url + "/events?category=SnakeLab&refresh=5"
        p.goto(url)
        first_ids = p.locator("#events tr[data-event-id]").evaluate_all(
            "rows => rows.map(r => Number(r.dataset.eventId))"
        )
        assert len(first_ids) >= 30
        opened = f"#events tr[data-event-id='{first_ids[3]}'] details"
        p.evaluate(f"() => {{ document.querySelector({opened!r}).open = true; }}")
        p.evaluate(
            "() => { window.__sameDocument = 'kept';"
            " document.getElementById('filter-category').focus({preventScroll: true});"
            " window.scrollTo(0, 600); }"
        )
        scrolled = p.evaluate("() => window.scrollY")
        assert scrolled == 600
        loads = len(fetched)

        (new_run,) = submit_runs(dbs, 1)
        with p.expect_response(lambda r: "/events" in r.url):
            p.clock.run_for(PERIOD_MS)
        p.wait_for_selector(f"#events tr a[title='{new_run}']", state="attached", timeout=10000)
        ids = p.locator("#events tr[data-event-id]").evaluate_all(
            "rows => rows.map(r => Number(r.dataset.eventId))"
        )
        assert ids[0] > max(first_ids) and ids[1:] == first_ids[: len(ids) - 1]
        assert p.evaluate("() => window.__sameDocument") == "kept"
        assert navigations == [url]  # the first load only (the fake clock fakes `performance`)
        assert p.url == url
        assert p.evaluate("() => window.scrollY") == scrolled
        assert p.evaluate("() => document.activeElement.id") == "filter-category"
        assert p.input_value("#filter-refresh") == "5"
        assert p.locator(opened).evaluate("d => d.open")  # an opened event stays open
        assert p.locator("#refresh-notice").count() == 0
        assert len(fetched) == loads + 1  # one fetch of the page, nothing else
        assert watched.problems == []

        # A hidden tab fetches nothing; shown again, it refreshes once a period has passed.
        p.evaluate(
            "() => { Object.defineProperty(document, 'visibilityState',"
            " {configurable: true, get: () => 'hidden'});"
            " document.dispatchEvent(new Event('visibilitychange')); }"
        )
        p.clock.run_for(3 * PERIOD_MS)
        assert len(fetched) == loads + 1
        p.evaluate(
            "() => { delete document.visibilityState;"
            " document.dispatchEvent(new Event('visibilitychange')); }"
        )
        with p.expect_response(lambda r: "/events" in r.url):
            p.clock.run_for(PERIOD_MS)
        assert len(fetched) == loads + 2

        # The server goes away: the rows stay and a notice says why they are not refreshed.
        shown = p.locator("#events tr[data-event-id]").count()
        server.process.stop(10)
        p.clock.run_for(PERIOD_MS)
        notice = p.locator("#refresh-notice")
        notice.wait_for(state="visible", timeout=10000)
        assert notice.inner_text().startswith("not refreshed: no answer from the server")
        assert p.locator("#events tr[data-event-id]").count() == shown
        assert p.locator(f"#events tr a[title='{new_run}']").count() == 1
        assert p.evaluate("() => window.__sameDocument") == "kept"
        assert p.evaluate("() => window.scrollY") == scrolled
        assert navigations == [url]
        p.screenshot(path=str(test_output_dir / "refresh-failed.png"))
        context.close()


def write_events(dbs: TestDatabases, *events: tuple[Any, dict[str, Any]]) -> None:
    """Events (a model or a name with its content, and ``EventLog.log``'s fields), each in its
    own transaction, from a thread of its own (Playwright's sync API runs a loop in this one)."""

    async def write() -> None:
        async with Database(dbs.settings()) as db:
            log = EventLog(db)
            for event, fields in events:
                if isinstance(event, tuple):
                    await log.log(*event, **fields)
                else:
                    await log.log(event, **fields)

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, write()).result()


def golden(run: RealRun, simulations: int, score: int) -> tuple[Any, dict[str, Any]]:
    """A ``golden_config_created`` of ``run`` with its ``experiment_highscores`` row."""
    content = {"run_id": run.run_id, "high_score": score, "seed": 1970, "reason": f"got {score}"}
    return ("golden_config_created", content), {
        "highscore": HighscoreRow(simulations, score, 1970),
        "process_id": run.run_id,
    }


def test_golden_highscores_proposers_and_simulation_pages_refresh_in_place(
    db_env, browser, tmp_path
):
    """The golden configurations, high scores, proposers and simulation pages with ``refresh``
    show what arrived (a golden, a proposer, a run's new state) in place: the document (a
    marker on ``window``) survives, nothing navigates, the selector keeps its value."""
    runs = read_runs(limit=4)
    runs[3].status = "running"
    with private_databases(db_env) as mine:
        add_runs(mine, runs)
        write_events(mine, golden(runs[0], 1, 30))
        with reports_server(mine, tmp_path / "reports.log") as server:
            context, watched, navigations = watched_page(browser)
            p = watched.page

            def refreshed(url: str, change: Any, arrived: str) -> None:
                """At ``url``: mark the document, make ``change``, let one period pass, wait
                for ``arrived``; the same document, no navigation, the setting kept."""
                p.goto(url)
                navigations.clear()
                p.evaluate("() => { window.__sameDocument = 'kept'; }")
                change()
                with p.expect_response(lambda r: r.url == url):
                    p.clock.run_for(PERIOD_MS)
                p.wait_for_selector(arrived, state="attached", timeout=15000)
                assert p.evaluate("() => window.__sameDocument") == "kept", url
                assert navigations == [] and p.url == url
                assert p.input_value("#filter-refresh") == "5"

            # The selector itself: choosing 5 s reloads with the page's other values kept.
            p.goto(server.url + "/golden-configurations?limit=50")
            with p.expect_navigation():
                p.select_option("#filter-refresh", "5")
            assert p.url == server.url + "/golden-configurations?limit=50&refresh=5"

            rows = "#golden-table tbody tr[data-event-id]"
            assert p.locator(rows).count() == 1
            refreshed(
                server.url + "/golden-configurations?limit=50&refresh=5",
                lambda: write_events(mine, golden(runs[1], 2, 41)),
                f"#golden-table a[href='/simulations/{runs[1].run_id}']",
            )
            assert p.locator(rows).count() == 2

            url = server.url + "/experiment-highscores?refresh=5"
            p.goto(url)
            p.wait_for_selector("#highscores-plot[data-ready=true]", timeout=15000)
            p.evaluate("() => { document.getElementById('highscores-plot').__old = true; }")
            refreshed(
                url,
                lambda: write_events(mine, golden(runs[2], 3, 52)),
                f"#highscores-table a[href='/simulations/{runs[2].run_id}']",
            )
            p.wait_for_function(
                "() => { const d = document.getElementById('highscores-plot');"
                " return !d.__old && d.dataset.ready === 'true'; }",
                timeout=15000,
            )
            assert p.locator("#highscores-table tbody tr").count() == 3

            url = server.url + "/proposers?refresh=5"
            p.goto(url)
            assert p.locator("#no-proposers").count() == 1
            refreshed(
                url,
                lambda: write_events(
                    mine,
                    (ConversationStarted(parameter="gamma", proposer="tpe"), {"process_id": "c1"}),
                    (
                        ProposalAccepted(run_id=runs[3].run_id, parameter="gamma"),
                        {"process_id": "c1"},
                    ),
                ),
                "#proposers-table tr[data-proposer=tpe]",
            )

            def finish() -> None:
                with closing(mine.connect("snakelab", mine.snakelab_db)) as connection:
                    with connection.cursor() as cur:
                        cur.execute(
                            "UPDATE simulation_runs SET status = 'completed', high_score = 77"
                            " WHERE run_id = %s",
                            (runs[3].run_id,),
                        )
                    connection.commit()

            url = server.url + f"/simulations/{runs[3].run_id}?refresh=5"
            p.goto(url)
            assert p.inner_text("#run-status") == "running"
            refreshed(url, finish, "#run-status:text-is('completed')")
            assert p.inner_text("#run-score") == "77"
            assert watched.problems == []
            context.close()
