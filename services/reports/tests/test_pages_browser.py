"""The pages in headless Chromium, served by ``ax3l-reports`` as a real uvicorn subprocess over
the user's real runs and a replayed history."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from contextlib import closing

import pytest
from headless_browser import Watched, have_chromium, plotted_traces
from playwright.sync_api import Browser, Page
from reports_testing import FakeSnakeLab, Server, StatusServer, reports_server, running_status
from stored_rows import stored_rows

from ax3l.testing.plugin import wait_until

pytestmark = pytest.mark.skipif(not have_chromium(), reason="Debian's chromium is needed")


@pytest.fixture(scope="module")
def snakelab() -> Iterator[FakeSnakeLab]:
    with closing(FakeSnakeLab()) as fake:
        yield fake


@pytest.fixture(scope="module")
def server(experiment, snakelab, tmp_path_factory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("reports") / "reports.log"
    with reports_server(experiment.dbs, log, snakelab.endpoint) as running:
        yield running


@pytest.fixture
def page(browser: Browser) -> Iterator[Watched]:
    with closing(browser.new_context(viewport={"width": 1400, "height": 1000})) as context:
        yield Watched(context.new_page())


def test_every_page_loads_cleanly(server, experiment, page, test_output_dir):
    """Every page renders without console errors, script errors or failed requests."""
    replay = experiment.replay
    golden_run = replay.goldens[-1][1].run_id
    pages = {
        "dashboard": "/",
        "event-log": "/events",
        "runs": "/runs",
        "plot-history": "/plots/history",
        "plot-parallel": "/plots/parallel",
        "plot-importance": "/plots/importance",
        "prompts": "/events?event=prompt_sent",
        "prompt": f"/events/{replay.prompt_ids[-1]}",
        "reply": f"/events/{replay.reply_ids[-1]}",
        "golden-event": f"/events/{replay.goldens[-1][0]}",
        "experiment-highscores": "/experiment-highscores",
        "golden-configurations": "/golden-configurations",
        "score-distribution": "/score-distribution",
        "simulation": f"/simulations/{golden_run}",
        "proposers": "/proposers",
        "api-reference": "/api-reference",
        "runs-compare": f"/runs/compare?run={golden_run}&run={experiment.runs[0].run_id}",
    }
    for name, path in pages.items():
        page.page.goto(server.url + path)
        if page.page.locator("[data-figure]").count():
            page.page.wait_for_selector("[data-figure][data-ready=true]", timeout=15000)
            # WebGL plots draw under the CSP (the strict plotly.js bundle needs no eval).
            assert "WebGL is not supported" not in page.page.inner_text("body"), name
        page.page.screenshot(path=str(test_output_dir / f"{name}.png"), full_page=True)
    assert page.problems == []


def test_the_api_link_opens_an_offline_reference_of_every_json_endpoint(server, page):
    """The nav's API link works without internet: every /api/ operation, with parameters."""
    p = page.page
    p.goto(server.url + "/events")
    with p.expect_navigation():
        p.click("header nav a:text-is('API')")
    assert p.url.endswith("/api-reference")
    document = p.request.get(server.url + "/openapi.json").json()
    expected = sorted(
        (method.upper(), path)
        for path, item in document["paths"].items()
        if path.startswith("/api/") or path in ("/health", "/ready")
        for method in item
    )
    shown = p.locator("section.api-op").evaluate_all(
        "ss => ss.map(s => [s.dataset.method, s.dataset.path])"
    )
    assert sorted(map(tuple, shown)) == expected
    events = p.locator("section.api-op[data-path='/api/events']")
    names = events.locator(".api-params td:first-child").all_inner_texts()
    assert {"category", "event", "parameter"} <= {n.rstrip(" *") for n in names}
    assert p.locator("script").count() == 1  # only the shared reports.js: nothing from a CDN
    assert page.problems == []


def test_filters_narrow_events_and_show_the_parameter_column(server, page, test_output_dir):
    """Category narrows the Event choices; Prompt adds the Parameter column and filter."""
    p = page.page
    p.goto(server.url + "/events")
    assert p.locator("th", has_text="Parameter").count() == 0

    with p.expect_navigation():
        p.select_option("#filter-category", "Conversation")
    assert "category=Conversation" in p.url
    offered = p.locator("#filter-event option").evaluate_all("os => os.map(o => o.value)")
    assert offered == [
        "",
        "conversation_started",
        "conversation_ended",
        "conversation_resumed",
        "prompt_sent",
        "reply_received",
    ]
    categories = p.locator("#events tbody tr td:nth-child(4)").all_inner_texts()
    assert categories and set(categories) == {"Conversation"}

    with p.expect_navigation():
        p.select_option("#filter-event", label="Prompt")
    assert p.locator("#events th", has_text="Parameter").count() == 1
    assert p.locator("#filter-parameter").count() == 1
    assert set(p.locator("#events tbody tr").evaluate_all("rs => rs.map(r => r.dataset.name)")) == {
        "prompt_sent"
    }

    with p.expect_navigation():
        p.select_option("#filter-parameter", "gamma")
    parameters = p.locator("#events td.parameter").all_inner_texts()
    assert parameters and set(parameters) == {"gamma"}
    p.screenshot(path=str(test_output_dir / "prompts-gamma.png"), full_page=True)

    # The prompt row links to its detail, which keeps source and parameter.
    with p.expect_navigation():
        p.locator("#events td.summary a").first.click()
    assert p.locator("#event-parameter").inner_text() == "gamma"
    assert p.locator("#event-source").inner_text()
    assert p.locator("#prompt-text").inner_text()

    # A category that does not hold the chosen event drops the event (and its parameter).
    p.go_back()
    with p.expect_navigation():
        p.select_option("#filter-category", "SnakeLab")
    assert "event=" not in p.url and "parameter=" not in p.url
    assert p.locator("#filter-parameter").count() == 0
    assert page.problems == []


def test_pages_through_older_events(server, page):
    """Older → and ← Newer move through the log by event id without repeating a row."""
    p = page.page
    p.goto(server.url + "/events?limit=40")
    first = p.locator("#events tbody tr").evaluate_all("rs => rs.map(r => +r.dataset.eventId)")
    with p.expect_navigation():
        p.click("#older")
    second = p.locator("#events tbody tr").evaluate_all("rs => rs.map(r => +r.dataset.eventId)")
    assert len(first) == len(second) == 40 and min(first) > max(second)
    with p.expect_navigation():
        p.click("#newer")
    back = p.locator("#events tbody tr").evaluate_all("rs => rs.map(r => +r.dataset.eventId)")
    assert back == first


def _highscore_rows(experiment) -> list[tuple[int, int, int]]:
    return stored_rows(
        experiment.dbs,
        "SELECT simulations, score, seed FROM experiment_highscores ORDER BY simulations, event_id",
    )


def test_highscore_plot_points_are_the_table_rows(server, experiment, page, test_output_dir):
    """The plotted step line is exactly experiment_highscores, flat to the current run count,
    with a marker at every seed change."""
    p = page.page
    p.goto(server.url + "/experiment-highscores")
    by_name = plotted_traces(p, "highscores-plot")
    rows = _highscore_rows(experiment)
    golden = by_name["Accepted golden scores"]
    assert list(zip(golden["x"], golden["y"], strict=True)) == [(s, sc) for s, sc, _ in rows]
    assert golden["shape"] == "hv"
    extension = by_name["Since the last acceptance"]
    assert extension["x"] == [rows[-1][0], len(experiment.runs)]
    assert extension["y"] == [rows[-1][1], rows[-1][1]]
    seed_points = [
        (s, sc) for (s, sc, seed), prev in zip(rows[1:], rows, strict=False) if seed != prev[2]
    ]
    seeds = by_name["Golden on a fresh seed"]
    assert list(zip(seeds["x"], seeds["y"], strict=True)) == seed_points and len(seed_points) == 2
    # Hovering a point shows its seed, run and reason.
    point = p.locator("#highscores-plot .scatterlayer .trace:first-child .points path").nth(1)
    box = point.bounding_box()
    assert box is not None
    p.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    p.wait_for_selector(".hoverlayer .hovertext", timeout=5000)
    hover = p.locator(".hoverlayer").text_content() or ""
    second = experiment.replay.goldens[1][1]
    assert f"Seed: {second.seed}" in hover and f"Run: {second.run_id}" in hover
    assert "Reason: High score" in hover
    p.screenshot(path=str(test_output_dir / "experiment-highscores-hover.png"), full_page=True)
    assert page.problems == []


def test_script_in_a_reply_shows_as_text_and_never_runs(server, experiment, page, test_output_dir):
    """A `<script>` in the reply is visible text on the page and is not executed."""
    p = page.page
    p.goto(f"{server.url}/events/{experiment.replay.hostile_reply_id}")
    assert "<script>window.__pwned = true</script>" in p.locator("#reply-reasoning").inner_text()
    assert "<script>" in p.locator(".tool-arguments").inner_text()
    assert p.evaluate("() => window.__pwned === undefined")
    p.goto(f"{server.url}/?process=" + p.locator("dd.mono a").first.inner_text())
    assert p.evaluate("() => window.__pwned === undefined")
    p.screenshot(path=str(test_output_dir / "hostile-conversation.png"), full_page=True)


def reload_until(p: Page, url: str, selector: str, text: str, what: str) -> None:
    """Load ``url`` again and again until ``selector`` shows ``text`` (10 s at most)."""
    wait_until(
        lambda: p.goto(url) and text in p.locator(selector).inner_text(), timeout=10, what=what
    )


def test_status_bar_reads_snakelab_and_the_experiment(server, experiment, snakelab, page):
    """The status bar shows SnakeLab's state from its control socket and the experiment's
    golden, all-time high, run count, seed and cycles (the numbers /api/status gives, whose
    counting test_reports_api.py checks against a history counted by hand); a reload picks up
    a change of state."""
    p = page.page
    _, golden_run, _ = experiment.replay.goldens[-1]
    best = max(run.high_score for _, run, _ in experiment.replay.goldens)
    snakelab.active = None
    reload_until(
        p, server.url + "/events", "#snakelab-state", "Idle", "SnakeLab idle on the status bar"
    )
    assert p.locator("#golden-high-score .v").inner_text() == str(golden_run.high_score)
    assert p.locator("#all-time-high-score .v").inner_text() == str(best)
    assert p.locator("#simulations-submitted .v").inner_text() == str(len(experiment.runs))
    assert p.locator("#current-seed .v").inner_text() == str(golden_run.seed)
    with urllib.request.urlopen(server.url + "/api/status", timeout=30) as answer:
        status = json.loads(answer.read())
    assert status["experiment_cycles"] > 10
    assert p.locator("#experiment-cycles .v").inner_text() == str(status["experiment_cycles"])
    stagnant = p.locator("#experiment-cycles .muted").inner_text()
    assert stagnant.startswith(f"{status['stagnant_cycles']} stagnant")
    snakelab.active = running_status(experiment.runs[-1].run_id)
    reload_until(
        p,
        server.url + "/events",
        "#snakelab-state",
        "Running Simulation",
        "Running Simulation on the status bar",
    )
    assert "700/1500" in p.locator("#snakelab-state").inner_text()


def test_refresh_selector_updates_the_page_in_place(server, page):
    """Choosing 5 s keeps the filters; the page then updates itself without reloading
    (test_live_refresh_browser.py checks what the update keeps)."""
    p = page.page
    p.clock.install()
    p.goto(server.url + "/events?category=SnakeLab")
    with p.expect_navigation():
        p.select_option("#filter-refresh", "5")
    assert "refresh=5" in p.url and "category=SnakeLab" in p.url
    p.evaluate("() => { window.__sameDocument = true; }")
    with p.expect_response(lambda r: "/events?" in r.url and "refresh=5" in r.url):
        p.clock.run_for(5000)
    p.wait_for_selector("body[data-refreshed-at]", state="attached", timeout=5000)
    assert p.evaluate("() => window.__sameDocument") is True
    assert "refresh=5" in p.url and p.input_value("#filter-refresh") == "5"
    assert page.problems == []


def test_simulation_page_draws_the_best_game(server, experiment, page):
    """The run page shows status, score, episodes, config and the snapshot's board."""
    run = experiment.runs[0]
    p = page.page
    p.goto(f"{server.url}/simulations/{run.run_id}")
    assert p.locator("#run-status").inner_text() == "completed"
    assert p.locator("#run-score").inner_text() == str(run.high_score)
    assert p.locator("#run-episodes").inner_text().startswith("1,500")
    assert p.locator("#board .snake-head").count() == 1
    assert p.locator("#board .snake-body").count() == run.high_score + 2
    assert p.locator("#board .food").count() == 1
    caption = p.locator("#board-caption").inner_text()
    assert re.fullmatch(rf"Score {run.high_score} · length \d+ · episode \d+ · move \d+", caption)
    config = dict(
        zip(
            p.locator("#run-config th").all_inner_texts(),
            p.locator("#run-config td").all_inner_texts(),
            strict=True,
        )
    )
    assert config["model.hidden_size"] == str(int(run.flat["model_hidden_size"]))
    assert config["training.learning_rate"] == str(run.flat["training_learning_rate"])
    p.wait_for_selector("#episodes-plot[data-ready=true]", timeout=15000)
    assert page.problems == []


def test_status_bar_shows_the_loop_and_its_outage(
    experiment, snakelab, page, tmp_path, test_output_dir
):
    """In a real browser the bar shows the orchestrator's phase, entry, failure streak,
    fallback and last error, then "orchestrator unavailable since" once it stops answering;
    an event row's sentence opens to its JSON."""
    status = {
        "phase": "conversing",
        "parameter": "gamma",
        "index": 4,
        "proposer": "llm",
        "failure_streak": 2,
        "fallback_proposer": "tpe",
        "llm_fallback_after": 3,
        "last_error": "gamma: model timeout: no reply within the timeout",
        "last_error_at": time.time() - 42,
    }
    orchestrator = StatusServer(status)
    stopped = False
    try:
        with reports_server(
            experiment.dbs, tmp_path / "reports.log", snakelab.endpoint, orchestrator.url
        ) as server:
            p = page.page
            reload_until(
                p, server.url + "/events", "#loop-state", "Conversing", "the loop on the status bar"
            )
            assert "gamma (entry 5) · llm" in p.locator("#loop-state").inner_text()
            streak = p.locator("#failure-streak")
            assert streak.is_visible() and "2 / 3" in streak.inner_text()
            assert "tpe takes over at 3" in streak.inner_text()
            error = p.locator("#last-error")
            assert error.is_visible() and "model timeout" in error.inner_text()
            assert re.fullmatch(
                r"\d+ s ago · [-\d]+ [:\d]+ UTC", p.locator("#last-error-age").inner_text()
            )
            row = p.locator("#events tr[data-name=configuration_compared] details.content").first
            assert row.locator("summary").inner_text().startswith("High score: ")
            assert not row.locator("pre").is_visible()
            row.locator("summary").click()
            assert '"reason"' in row.locator("pre").inner_text()
            p.locator("#status-bar").screenshot(path=str(test_output_dir / "status-bar-loop.png"))
            p.screenshot(path=str(test_output_dir / "event-log-sentences.png"))

            orchestrator.close()
            stopped = True
            reload_until(
                p,
                server.url + "/events",
                "#loop-state",
                "orchestrator unavailable since",
                "the orchestrator shown unavailable",
            )
            assert p.locator("#failure-streak").count() == 0
            p.locator("#status-bar").screenshot(
                path=str(test_output_dir / "status-bar-orchestrator-down.png")
            )
            assert page.problems == []
    finally:
        if not stopped:
            orchestrator.close()


PHONE = {"width": 390, "height": 844}
# What overflows the page's width at a phone's: the element reaching furthest right, named.
WIDEST = """() => {
  let widest = null, right = 0;
  for (const el of document.body.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.right > right + 0.5 && getComputedStyle(el).position !== 'fixed') {
      let clipped = false;
      for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
        const o = getComputedStyle(up).overflowX;
        if (o === 'auto' || o === 'scroll' || o === 'hidden') { clipped = true; break; }
      }
      if (!clipped) { right = box.right; widest = el; }
    }
  }
  const name = !widest ? '' : widest.tagName.toLowerCase() + (widest.id ? '#' + widest.id : '')
    + (typeof widest.className === 'string' ? '.' + widest.className.split(' ')[0] : '');
  return [document.documentElement.scrollWidth, Math.round(right), name];
}"""


def test_no_page_is_wider_than_a_phone(server, experiment, browser, test_output_dir):
    """At 390 px (a phone, with touch and its pixel ratio) no page scrolls sideways: wide tables
    scroll inside their own box, long words and hashes wrap. On /runs and the dashboard's last
    runs the Score column starts on the screen."""
    replay = experiment.replay
    golden_run = replay.goldens[-1][1].run_id
    paths = [
        "/", "/events", "/runs", "/plots/history", "/plots/slice", "/plots/parallel",
        "/plots/importance", f"/events/{replay.prompt_ids[-1]}", f"/events/{replay.goldens[-1][0]}",
        "/experiment-highscores", "/golden-configurations", "/score-distribution",
        f"/simulations/{golden_run}", "/proposers", "/comparison", "/api-reference",
        f"/runs/compare?run={golden_run}&run={experiment.runs[0].run_id}",
    ]  # fmt: skip
    phone = browser.new_context(
        viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2
    )
    with closing(phone):
        watched = Watched(phone.new_page())
        p = watched.page
        wide = {}
        for path in paths:
            p.goto(server.url + path)
            if p.locator("[data-figure]").count():
                p.wait_for_selector("[data-figure][data-ready=true]", timeout=15000)
            width, right, element = p.evaluate(WIDEST)
            if width > PHONE["width"]:
                wide[path] = (width, right, element)
                name = path.strip("/").replace("/", "-") or "dashboard"
                p.screenshot(path=str(test_output_dir / f"phone-{name}.png"), full_page=True)
        assert wide == {}, wide
        for path, table in (("/runs", "#runs"), ("/", "#dash-last-runs")):
            p.goto(server.url + path)
            header = p.locator(f"{table} th", has_text="Score").first
            box = header.bounding_box()
            assert box is not None and box["x"] + box["width"] <= PHONE["width"], (path, box)
        assert watched.problems == []


LIVE_PAGES = ("/", "/events", "/runs", "/golden-configurations", "/experiment-highscores")


def _refresh_of(p: Page) -> tuple[str | None, str]:
    """The page's in-place refresh period and what its selector shows."""
    return p.evaluate("document.body.dataset.refresh || null"), p.input_value("#filter-refresh")


def test_refresh_is_on_by_default_while_the_experiment_runs_and_applies_at_once_everywhere(
    experiment, snakelab, page, tmp_path
):
    """With the orchestrator answering (a live experiment) every page refreshes every 30 s
    unless told otherwise; with it stopped, none does. On /runs, as on the other pages,
    choosing a period applies at once (no Apply), and the URL carries no empty filters."""
    loop = StatusServer({"phase": "waiting", "process_id": "loop-1", "updated_at": time.time()})
    try:
        with reports_server(
            experiment.dbs, tmp_path / "live.log", snakelab.endpoint, loop.url
        ) as live:
            p = page.page
            p.goto(live.url + "/")
            for path in LIVE_PAGES:
                wait_until(
                    lambda path=path: (p.goto(live.url + path), _refresh_of(p))[1][0] == "30",
                    10,
                    f"{path} refreshing by default",
                )
                assert _refresh_of(p) == ("30", "30"), path
            p.goto(live.url + "/runs?seed=1970")
            with p.expect_navigation():
                p.select_option("#filter-refresh", "5")
            assert "refresh=5" in p.url and "seed=1970" in p.url, p.url
            assert "=&" not in p.url + "&" and not p.url.endswith("="), p.url
            assert _refresh_of(p) == ("5", "5")
            with p.expect_navigation():
                p.select_option("#filter-refresh", "0")
            assert "refresh=0" in p.url and _refresh_of(p) == (None, "0")
            p.goto(live.url + "/events?refresh=0")
            assert _refresh_of(p) == (None, "0")

            loop.status = {**loop.status, "phase": "stopped"}
            wait_until(
                lambda: (p.goto(live.url + "/"), _refresh_of(p))[1][0] is None,
                10,
                "no refresh once the loop stopped",
            )
            for path in LIVE_PAGES:
                p.goto(live.url + path)
                assert _refresh_of(p) == (None, "0"), path
    finally:
        loop.close()
    assert page.problems == []


def test_the_golden_configuration_copies_as_snakelab_json_in_one_click(server, browser):
    """The dashboard's and the golden page's Copy button put the golden configuration's JSON
    (SnakeLab's nested config, as its event stores it) on the clipboard; a run page copies
    that run's configuration."""
    context = browser.new_context(
        viewport={"width": 1400, "height": 1000}, permissions=["clipboard-read", "clipboard-write"]
    )
    with closing(context):
        watched = Watched(context.new_page())
        p = watched.page
        golden = p.request.get(server.url + "/api/golden-configurations?limit=1").json()
        config = golden["configurations"][0]["config"]
        for path in ("/", "/golden-configurations"):
            p.goto(server.url + path)
            p.evaluate("() => navigator.clipboard.writeText('')")
            p.click("#golden-json-copy")
            p.wait_for_function("() => document.getElementById('golden-json-copied').textContent")
            assert p.inner_text("#golden-json-copied") == "copied"
            assert json.loads(p.evaluate("() => navigator.clipboard.readText()")) == config
        run = golden["configurations"][0]["run_id"]
        p.goto(f"{server.url}/simulations/{run}")
        p.click("#run-config-json-copy")
        p.wait_for_function("() => document.getElementById('run-config-json-copied').textContent")
        copied = json.loads(p.evaluate("() => navigator.clipboard.readText()"))
        stored = p.request.get(f"{server.url}/api/simulations/{run}").json()["config"]
        assert copied == stored and copied["seed"] == config["seed"]
        assert watched.problems == []
