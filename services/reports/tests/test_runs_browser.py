"""The runs table and the plots in headless Chromium, served by ``ax3l-reports`` as a real
uvicorn subprocess over the user's real runs and a replayed history in MariaDB."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import closing

import pytest
from headless_browser import Watched, have_chromium, plotted_traces
from reports_history import expected_rows
from reports_testing import Server, reports_server

pytestmark = pytest.mark.skipif(not have_chromium(), reason="Debian's chromium is needed")

SLICE_TRACES = (
    "id => { const gd = document.getElementById(id); return {"
    " data: gd.data.map(t => ({name: t.name, type: t.type, x: Array.from(t.x || []),"
    " y: Array.from(t.y || [])})), shapes: gd._fullLayout.shapes.map(s => s.x0),"
    " paper: gd._fullLayout.paper_bgcolor}; }"
)


@pytest.fixture(scope="module")
def server(experiment, tmp_path_factory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("reports") / "reports.log"
    with reports_server(experiment.dbs, log) as running:
        yield running


@pytest.fixture
def page(browser) -> Iterator[Watched]:
    with closing(browser.new_context(viewport={"width": 1400, "height": 1000})) as context:
        yield Watched(context.new_page())


def _ids(page) -> list[int]:
    return page.locator("#runs tbody tr").evaluate_all("rs => rs.map(r => +r.dataset.id)")


def test_runs_page_sorts_filters_pages_and_downloads(server, experiment, browser, tmp_path):
    """In a browser: a column header sorts, Apply filters, Next and Previous page without
    repeating a run, and the CSV link downloads exactly the filtered runs."""
    with closing(
        browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    ) as context:
        page = Watched(context.new_page())
        p = page.page
        p.goto(server.url + "/runs?limit=25")
        assert _ids(p) == list(range(len(experiment.runs), len(experiment.runs) - 25, -1))
        with p.expect_navigation():
            p.click("#runs th[data-column=high_score] a")
        assert "sort=high_score" in p.url and "order=desc" in p.url
        expected = expected_rows(experiment)
        by_score = sorted(expected, key=lambda r: (r["high_score"], r["id"]), reverse=True)
        assert _ids(p) == [r["id"] for r in by_score[:25]]

        p.select_option("#filter-status", "completed")
        p.select_option("#filter-seed", "1970")
        with p.expect_navigation():
            p.click("#runs-filters button[type=submit]")
        wanted = [r for r in by_score if r["status"] == "completed" and r["seed"] == 1970]
        first = _ids(p)
        assert first == [r["id"] for r in wanted[:25]]
        with p.expect_navigation():
            p.click("#next")
        second = _ids(p)
        assert second == [r["id"] for r in wanted[25:50]]
        with p.expect_navigation():
            p.click("#previous")
        assert _ids(p) == first

        with p.expect_download() as download:
            p.click("#download-csv")
        saved = tmp_path / "runs.csv"
        download.value.save_as(saved)
        with saved.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert [int(row["id"]) for row in rows] == [r["id"] for r in wanted]
        assert page.problems == []


def test_the_table_scrolls_inside_its_box_on_a_phone(server, browser):
    """On a 390 px wide phone the page itself does not scroll sideways; the table's box does."""
    with closing(
        browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    ) as context:
        p = context.new_page()
        p.goto(server.url + "/runs")
        assert p.evaluate("() => document.documentElement.scrollWidth") <= 390
        box = p.evaluate(
            "() => { const w = document.querySelector('.table-wrap');"
            " return [w.scrollWidth, w.clientWidth]; }"
        )
        assert box[0] > box[1]


def test_slice_plot_draws_every_completed_run_and_the_golden_value(server, experiment, browser):
    """The slice plot of training.gamma draws one WebGL point per completed run at its gamma
    and score and a line at the golden configuration's gamma; it is dark while the system is
    and turns light when the system does."""
    golden = experiment.replay.goldens[-1][1]
    completed = [r for r in expected_rows(experiment) if r["status"] == "completed"]
    with closing(
        browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme="dark")
    ) as context:
        page = Watched(context.new_page())
        p = page.page
        p.goto(server.url + "/plots/slice?parameter=training_gamma")
        p.wait_for_selector("#slice-plot[data-ready=true]", timeout=15000)
        drawn = p.evaluate(SLICE_TRACES, "slice-plot")
        seeds = [t for t in drawn["data"] if t["type"] == "scattergl"]
        assert sorted(t["name"] for t in seeds) == sorted(
            f"seed {seed}" for seed in {r["seed"] for r in completed}
        )
        points = [(x, y, t["name"]) for t in seeds for x, y in zip(t["x"], t["y"], strict=True)]
        assert sorted(points) == sorted(
            (r["training_gamma"], r["high_score"], f"seed {r['seed']}") for r in completed
        )
        assert drawn["shapes"] == [golden.flat["training_gamma"]]
        assert drawn["paper"] == "#0f172a"
        assert p.evaluate("() => getComputedStyle(document.body).backgroundColor") == (
            "rgb(15, 23, 42)"
        )
        assert "WebGL is not supported" not in p.inner_text("body")
        p.emulate_media(color_scheme="light")
        p.wait_for_selector("#slice-plot[data-theme=light]", timeout=10000)
        assert p.evaluate(SLICE_TRACES, "slice-plot")["paper"] == "#ffffff"
        assert page.problems == []


def test_old_event_log_links_land_on_the_event_log(server, browser):
    """A link from when the log was at / (with its filters) lands on /events with them."""
    with closing(browser.new_context()) as context:
        p = context.new_page()
        p.goto(server.url + "/?category=SnakeLab&limit=20")
        assert p.url == server.url + "/events?category=SnakeLab&limit=20"
        categories = p.locator("#events tbody tr td:nth-child(4)").all_inner_texts()
        assert len(categories) == 20 and set(categories) == {"SnakeLab"}
        p.goto(server.url + "/")
        assert p.locator("#dash-golden-score").inner_text().isdigit()
        assert p.locator("#dash-last-runs tbody tr").count() == 12


def test_runs_ticked_across_pages_open_side_by_side_with_curves_overlaid(server, experiment, page):
    """Ticking runs on two pages of /runs keeps them (a refresh too), holds the choice to 8,
    and Compare opens them side by side in the order ticked with their curves overlaid."""
    p = page.page
    total = len(experiment.runs)
    p.goto(server.url + "/runs?limit=25&refresh=5")
    p.check(f"#runs tr[data-id='{total}'] input[data-compare]")
    p.check(f"#runs tr[data-id='{total - 1}'] input[data-compare]")
    assert p.inner_text("#compare-count") == "2 of at most 8 runs chosen"
    # A refresh swaps the table: the ticks stay.
    before = p.evaluate("() => document.body.dataset.refreshedAt || ''")
    p.wait_for_function(f"() => (document.body.dataset.refreshedAt || '') !== {before!r}")
    assert p.is_checked(f"#runs tr[data-id='{total}'] input[data-compare]")
    with p.expect_navigation():
        p.click("#next")
    p.check(f"#runs tr[data-id='{total - 30}'] input[data-compare]")
    for run in range(total - 31, total - 36, -1):
        p.check(f"#runs tr[data-id='{run}'] input[data-compare]")
    assert p.inner_text("#compare-count") == "8 of at most 8 runs chosen"
    assert p.is_disabled(f"#runs tr[data-id='{total - 40}'] input[data-compare]")
    with p.expect_navigation():
        p.click("#compare-button")
    assert "/runs/compare?" in p.url
    ids = [run.run_id for run in experiment.runs]
    order = [total, total - 1, total - 30, *range(total - 31, total - 36, -1)]
    shown = p.locator("#compare thead th[data-run-id]").evaluate_all(
        "hs => hs.map(h => h.dataset.runId)"
    )
    assert shown == [ids[number - 1] for number in order]
    assert p.locator("#compare tr.differs").count() >= 1
    assert p.inner_text("#compare-differing").startswith("They differ in")
    assert page.problems == []


def test_two_runs_with_episodes_draw_two_overlaid_curves(server, experiment, page):
    """The comparison's plot draws each run's 50-episode average under its name, in its
    column's colour (a run without episodes draws nothing and keeps its colour)."""
    p = page.page
    first, second, bare = experiment.runs[0], experiment.runs[1], experiment.runs[40]
    p.goto(f"{server.url}/runs/compare?run={bare.run_id}&run={first.run_id}&run={second.run_id}")
    traces = plotted_traces(p, "compare-curves")
    assert list(traces) == [f"run 1 ({first.run_id[:8]})", f"run 2 ({second.run_id[:8]})"]
    assert len(traces[f"run 1 ({first.run_id[:8]})"]["x"]) == 1500
    colours = p.evaluate(
        "() => document.getElementById('compare-curves').data.map(t => t.line.color)"
    )
    columns = p.locator("#compare thead th[data-run-id]").evaluate_all(
        "hs => hs.map(h => getComputedStyle(h).borderTopColor)"
    )
    rgb = ["rgb({}, {}, {})".format(*(int(c[i : i + 2], 16) for i in (1, 3, 5))) for c in colours]
    assert rgb == columns[1:]
    assert page.problems == []
