"""The runs table (``/api/runs``, ``/runs``, its CSV and Parquet) over the user's real runs and
the replayed history in MariaDB, and its incremental refresh on a private database."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from contextlib import closing
from typing import Any

import httpx
import polars as pl
import pytest
from reports_history import HOSTILE, expected_rows, insert_runs, read_runs
from reports_testing import app_client, reports_settings

from ax3l.reports.app import create_app
from ax3l.reports.models.runs import TUNED_COLUMNS
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import ConversationStarted, ProposalAccepted, SimulationSubmitted
from ax3l.testing.provenance import backfilled


def in_order(rows: list[dict[str, Any]], sort: str, descending: bool) -> list[dict[str, Any]]:
    """``rows`` by ``sort`` then run number, both the same way; empty values last."""
    present = sorted(
        (r for r in rows if r[sort] is not None),
        key=lambda r: (r[sort], r["id"]),
        reverse=descending,
    )
    missing = sorted(
        (r for r in rows if r[sort] is None), key=lambda r: r["id"], reverse=descending
    )
    return present + missing


async def walk(client: Any, params: dict[str, Any]) -> tuple[list[int], list[int]]:
    """Run numbers paged forwards from the first page, then backwards from the last."""
    forward: list[int] = []
    pages: list[dict[str, Any]] = []
    cursor: dict[str, Any] = {}
    while True:
        response = await client.get("/api/runs", params={**params, **cursor})
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append(body)
        forward += [run["id"] for run in body["runs"]]
        if body["next_after"] is None:
            break
        cursor = {"after": body["next_after"]}
    backward: list[int] = list(reversed([run["id"] for run in pages[-1]["runs"]]))
    before = pages[-1]["previous_before"]
    while before is not None:
        body = (await client.get("/api/runs", params={**params, "before": before})).json()
        backward += list(reversed([run["id"] for run in body["runs"]]))
        before = body["previous_before"]
    return forward, list(reversed(backward))


def compare(shown: dict[str, Any], expected: dict[str, Any]) -> None:
    for name, value in expected.items():
        assert shown[name] == value, (name, shown["id"], shown[name], value)


async def test_every_run_is_listed_with_its_values_proposer_entry_and_golden_flag(
    client, experiment
):
    """/api/runs lists every SnakeLab run, newest first, with seed, status, score, the nine
    tuned values, the proposer and entry from the events and the golden flag."""
    expected = expected_rows(experiment)
    body = (await client.get("/api/runs", params={"limit": 1000})).json()
    assert body["total"] == body["matching"] == len(experiment.runs)
    assert [run["id"] for run in body["runs"]] == [row["id"] for row in reversed(expected)]
    for shown, wanted in zip(body["runs"], reversed(expected), strict=True):
        compare(shown, wanted)
    assert {run["proposer"] for run in body["runs"]} == {"llm", "tpe", None}
    assert sum(run["golden"] for run in body["runs"]) == len(experiment.replay.goldens)


@pytest.mark.parametrize(
    ("sort", "order", "params"),
    [
        ("high_score", "asc", {}),
        ("high_score", "desc", {}),
        ("proposer", "asc", {}),
        ("training_gamma", "desc", {"seed": 1970}),
        ("golden", "desc", {"status": "completed"}),
    ],
)
async def test_keyset_pages_neither_repeat_nor_skip_a_run_across_ties(
    client, experiment, sort, order, params
):
    """Paging by a column full of ties (scores, proposers, flags) with small pages goes through
    every matching run once, in the asked order with ties by run number, forwards and back."""
    expected = [
        row
        for row in expected_rows(experiment)
        if all(row[name] == value for name, value in params.items())
    ]
    wanted = in_order(expected, sort, order == "desc")
    forward, backward = await walk(client, {"sort": sort, "order": order, "limit": 20, **params})
    assert forward == [row["id"] for row in wanted]
    assert backward == forward


async def test_filters_narrow_the_runs(client, experiment):
    """Status, seed, entry, proposer, golden, score range and a tuned value's range combine."""
    expected = expected_rows(experiment)
    cases: list[tuple[dict[str, Any], Any]] = [
        ({"status": "completed"}, lambda r: r["status"] == "completed"),
        ({"seed": 1970, "entry": "gamma"}, lambda r: r["seed"] == 1970 and r["entry"] == "gamma"),
        ({"proposer": "tpe"}, lambda r: r["proposer"] == "tpe"),
        ({"golden": "true"}, lambda r: r["golden"]),
        (
            {"score_min": 40, "score_max": 45},
            lambda r: r["high_score"] is not None and 40 <= r["high_score"] <= 45,
        ),
        (
            {"model_hidden_size_min": 200, "training_learning_rate_max": 0.0025},
            lambda r: r["model_hidden_size"] >= 200 and r["training_learning_rate"] <= 0.0025,
        ),
    ]
    for params, keep in cases:
        body = (await client.get("/api/runs", params={**params, "limit": 1000})).json()
        wanted = sorted((r["id"] for r in expected if keep(r)), reverse=True)
        assert wanted, params
        assert [run["id"] for run in body["runs"]] == wanted, params
        assert body["matching"] == len(wanted)


async def test_csv_and_parquet_hold_the_current_filter_in_its_order(client, experiment):
    """The downloads hold exactly the runs the filter matches, in the asked order, with the
    table's columns; Parquet keeps the types."""
    params = {"seed": 1970, "status": "completed", "sort": "high_score", "order": "desc"}
    listed = (await client.get("/api/runs", params={**params, "limit": 1000})).json()["runs"]
    response = await client.get("/api/runs/export.csv", params=params)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert "ax3l-runs.csv" in response.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert [int(row["id"]) for row in rows] == [run["id"] for run in listed]
    assert [row["run_id"] for row in rows] == [run["run_id"] for run in listed]
    assert [float(row["training_gamma"]) for row in rows] == [
        run["training_gamma"] for run in listed
    ]
    response = await client.get("/api/runs/export.parquet", params=params)
    assert response.status_code == 200
    frame = pl.read_parquet(io.BytesIO(response.content))
    assert frame["id"].to_list() == [run["id"] for run in listed]
    assert frame["high_score"].to_list() == [run["high_score"] for run in listed]
    assert frame["model_hidden_size"].dtype == pl.Int64
    assert frame["golden"].to_list() == [run["golden"] for run in listed]
    assert frame["changes"].to_list() == [run["changes"] for run in listed]
    assert frame["score_difference"].to_list() == [run["score_difference"] for run in listed]
    # The downloads hold a row's facts; what a page works out (why, the seat) stays out.
    page_only = {"changed", "seat", "reason"}
    assert frame.columns == [name for name in listed[0] if name not in page_only]
    assert [row["changes"] or None for row in rows] == [run["changes"] for run in listed]


async def test_bad_queries_are_refused_with_a_message(client):
    """An unknown sort column or status, a reversed range and a foreign cursor answer 422."""
    cases = [
        {"sort": "run_id; DROP TABLE"},
        {"status": "done"},
        {"score_min": 50, "score_max": 10},
        {"after": "not-a-cursor"},
        {"after": "x", "before": "y"},
        {"limit": 0},
    ]
    for params in cases:
        response = await client.get("/api/runs", params=params)
        assert response.status_code == 422, params
        assert response.json()["message"], params
    first = (await client.get("/api/runs", params={"limit": 5, "sort": "seed"})).json()
    foreign = await client.get("/api/runs", params={"after": first["next_after"]})
    assert foreign.status_code == 422 and "sort=seed" in foreign.json()["message"]
    page = await client.get("/runs", params={"sort": "nope"})
    assert page.status_code == 422 and "text/html" in page.headers["content-type"]


async def test_the_page_shows_rows_filters_sort_links_and_downloads(client, experiment):
    """/runs renders the asked page with links that keep the filters."""
    response = await client.get("/runs", params={"seed": 1970, "sort": "high_score"})
    assert response.status_code == 200
    text = response.text
    assert 'id="runs"' in text and "/api/runs/export.csv?seed=1970&amp;sort=high_score" in text
    assert text.count('<tr data-id="') == 100
    assert 'id="next"' in text and 'id="previous"' not in text


async def test_new_runs_state_changes_and_provenance_arrive_without_a_full_read(
    databases, snakelab_tables
):
    """The in-memory table picks up a new run, a running run that finished, and a proposal's
    proposer (escaped on the page, even when it is markup), and reads all again after a wipe."""
    runs = read_runs(limit=6)
    runs[5].status = "running"
    with closing(databases.connect("snakelab", databases.snakelab_db)) as connection:
        insert_runs(connection, runs[:6], episodes_for=0)
        async with app_client(reports_settings(databases)) as client:
            body = (await client.get("/api/runs")).json()
            assert [r["id"] for r in body["runs"]] == [6, 5, 4, 3, 2, 1]
            assert body["runs"][0]["status"] == "running"
            assert body["runs"][0]["proposer"] is None

            with connection.cursor() as cur:
                cur.execute(
                    "UPDATE simulation_runs SET status = 'completed', high_score = 77"
                    " WHERE run_id = %s",
                    (runs[5].run_id,),
                )
            async with Database(databases.settings()) as db:
                log = EventLog(db)
                async with db.transaction() as cur:
                    await log.write(
                        cur,
                        ConversationStarted(parameter="gamma", proposer=HOSTILE),
                        process_id="c1",
                    )
                    await log.write(
                        cur,
                        ProposalAccepted(run_id=runs[5].run_id, parameter="gamma"),
                        process_id="c1",
                    )
                    await log.write(
                        cur,
                        SimulationSubmitted(run_id=runs[0].run_id, purpose="seeding"),
                        process_id=runs[0].run_id,
                    )
            backfilled(databases)
            insert_runs(connection, read_runs(limit=7)[6:], episodes_for=0)
            body = (await client.get("/api/runs")).json()
            by_id = {r["id"]: r for r in body["runs"]}
            assert sorted(by_id) == [1, 2, 3, 4, 5, 6, 7]
            assert by_id[6]["status"] == "completed" and by_id[6]["high_score"] == 77
            assert by_id[6]["proposer"] == HOSTILE and by_id[6]["entry"] == "gamma"
            assert by_id[1]["entry"] == "seeding" and by_id[1]["proposer"] == "ax3l"
            page = (await client.get("/runs")).text
            assert HOSTILE not in page and "&lt;script&gt;window.__pwned" in page

            with connection.cursor() as cur:
                cur.execute("DELETE FROM simulation_runs")
            insert_runs(connection, read_runs(limit=3)[1:], episodes_for=0)
            body = (await client.get("/api/runs")).json()
            assert [r["run_id"] for r in body["runs"]] == [r.run_id for r in read_runs(3)[:0:-1]]
            assert json.dumps(body)  # the whole page serialises


def _figure(page: str, figure_id: str) -> dict[str, Any]:
    block = rf'<script type="application/json" id="{figure_id}">(.*?)</script>'
    match = re.search(block, page, re.S)
    assert match is not None, figure_id
    return dict(json.loads(match.group(1)))


async def test_history_and_parallel_figures_hold_every_run(client, experiment):
    """The history plot has every completed run at its run number and score and the golden
    step line through the accepted scores; parallel coordinates have every completed run."""
    expected = expected_rows(experiment)
    completed = [r for r in expected if r["status"] == "completed"]
    history = _figure((await client.get("/plots/history")).text, "history-figure")
    traces = {trace["name"]: trace for trace in history["data"]}
    runs = traces["Runs"]
    assert list(zip(runs["x"], runs["y"], strict=True)) == [
        (r["id"], r["high_score"]) for r in completed
    ]
    golden = traces["Golden score"]
    accepted = [(sims, run.high_score) for _, run, sims in experiment.replay.goldens]
    assert list(zip(golden["x"], golden["y"], strict=False))[: len(accepted)] == accepted
    assert golden["line"]["shape"] == "hv" and golden["x"][-1] == len(expected)
    by_time = _figure((await client.get("/plots/history?x=time")).text, "history-figure")
    assert by_time["data"][0]["x"][0].startswith("2026-09-15T")
    interactive = "/plots/parallel?interactive=true"
    parallel = _figure((await client.get(interactive)).text, "parallel-figure")
    dimensions = parallel["data"][0]["dimensions"]
    assert [d["label"] for d in dimensions][-1] == "high score"
    assert [d["label"] for d in dimensions][5:7] == ["epsilon.initial", "epsilon.decay"]
    assert dimensions[-1]["values"] == [r["high_score"] for r in completed]
    assert dimensions[4]["values"] == [r["training_gamma"] for r in completed]
    seeded = _figure((await client.get(interactive + "&seed=1971")).text, "parallel-figure")
    assert len(seeded["data"][0]["dimensions"][0]["values"]) == sum(
        1 for r in completed if r["seed"] == 1971
    )


async def test_the_quick_parallel_lines_draw_every_completed_run_on_scaled_axes(client, experiment):
    """The default parallel coordinates are SVG lines: one per completed run, each axis from
    its lowest to its highest value, the bands by score in order and each run in its band."""
    completed = [r for r in expected_rows(experiment) if r["status"] == "completed"]
    page = (await client.get("/plots/parallel")).text
    assert "plotly-basic.min.js" in page and "plotly.min.js" not in page
    figure = _figure(page, "parallel-figure")
    axes = figure["layout"]["meta"]["axes"]
    columns = [*TUNED_COLUMNS, "high_score"]
    assert [a["label"] for a in axes][5:] == [
        "epsilon.initial",
        "epsilon.decay",
        "closer_to_food",
        "further_from_food",
        "high score",
    ]
    for axis, column in zip(axes, columns, strict=True):
        assert (axis["low"], axis["high"]) == (
            min(r[column] for r in completed),
            max(r[column] for r in completed),
        )
    drawn: list[tuple[float, float]] = []  # (gamma, score) of each line, read back
    low_band = -1.0
    for trace in figure["data"]:
        assert trace["type"] == "scatter" and trace["x"].count(None) == trace["y"].count(None)
        lines = [
            trace["y"][i : i + len(columns)] for i in range(0, len(trace["y"]), len(columns) + 1)
        ]
        back = [
            tuple(
                axes[j]["low"] + y * (axes[j]["high"] - axes[j]["low"])
                for j, y in ((4, line[4]), (-1, line[-1]))
            )
            for line in lines
        ]
        scores = [score for _, score in back]
        named = re.fullmatch(r"score (\d+)(?:–(\d+))?", trace["name"])
        assert named is not None, trace["name"]
        first, last = int(named.group(1)), int(named.group(2) or named.group(1))
        assert all(first - 0.05 <= score <= last + 0.05 for score in scores), trace["name"]
        if scores:
            assert min(scores) >= low_band  # the bands rise in the legend's order
            low_band = max(scores)
        drawn += back
    wanted = sorted((r["training_gamma"], r["high_score"]) for r in completed)
    assert len(drawn) == len(wanted)
    for (gamma, score), (want_gamma, want_score) in zip(sorted(drawn), wanted, strict=True):
        assert abs(gamma - want_gamma) < 1e-3 and abs(score - want_score) < 0.05


async def test_importance_counts_new_goldens_per_entry_and_says_its_limits(client, experiment):
    """Per entry: its runs, completed runs and new golden configurations, as the events tell;
    Optuna's importances cover tuned values and sum to 1; the page states the caveat."""
    expected = expected_rows(experiment)
    body = (await client.get("/api/plots/importance")).json()
    for item in body["entries"]:
        mine = [r for r in expected if r["entry"] == item["entry"]]
        assert item["runs"] == len(mine), item
        assert item["completed"] == sum(r["status"] == "completed" for r in mine)
        assert item["improvements"] == sum(r["golden"] for r in mine), item
    assert (
        sum(item["improvements"] for item in body["entries"]) == len(experiment.replay.goldens) - 3
    )  # the first golden and the two seed baselines came from no entry
    assert body["parameters"] and {p["column"] for p in body["parameters"]} <= set(TUNED_COLUMNS)
    assert abs(sum(p["importance"] for p in body["parameters"]) - 1) < 1e-6
    page = (await client.get("/plots/importance")).text
    assert "one-at-a-time" in page and 'id="importance-caveat"' in page


async def test_dashboard_shows_golden_last_runs_and_turn(client, experiment):
    """/ shows the golden configuration's score and values, the twelve last runs and links."""
    golden = experiment.replay.goldens[-1][1]
    page = (await client.get("/")).text
    assert f'<span class="big" id="dash-golden-score">{golden.high_score}</span>' in page
    assert f'<td class="num">{golden.flat["training_gamma"]}</td>' in page
    shown = re.findall(r'<tr data-id="(\d+)">', page)
    assert shown == [str(n) for n in range(len(experiment.runs), len(experiment.runs) - 12, -1)]
    for link in ("/runs", "/plots/slice", "/events", "/proposers"):
        assert f'href="{link}"' in page
    moved = await client.get("/?event=prompt_sent&limit=5")
    assert moved.status_code == 308
    assert moved.headers["location"] == "/events?event=prompt_sent&limit=5"
    refreshing = await client.get("/?refresh=30")  # the dashboard's own selector: no redirect
    assert refreshing.status_code == 200 and '<body data-refresh="30">' in refreshing.text
    assert (await client.get("/?refresh=7")).status_code == 422


async def test_the_table_is_read_at_startup_once_and_a_request_meanwhile_shares_that_read(
    databases, snakelab_tables
):
    """The report server reads the runs table in the background as soon as it starts, with no
    request (the first visitor does not wait); a request that arrives during that read waits
    for it and the whole table is read once, not twice."""
    with closing(databases.connect("snakelab", databases.snakelab_db)) as connection:
        insert_runs(connection, read_runs(limit=5), episodes_for=0)
    settings = reports_settings(databases)
    for requested in (False, True):
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            table = app.state.resources.runs
            assert table.full_reads == 0  # started in the background, not before readiness
            if requested:
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(
                    transport=transport, base_url="http://reports"
                ) as client:
                    body = (await client.get("/api/runs")).json()
                assert [run["id"] for run in body["runs"]] == [5, 4, 3, 2, 1]
            else:
                for _ in range(400):
                    if table.full_reads:
                        break
                    await asyncio.sleep(0.05)
                assert table.full_reads == 1  # read with no request
                async with Database(databases.settings()) as db:
                    # Filled without a request: this call only checks for changes.
                    frame = await table.frame(db, app.state.resources.schema)
                assert frame["id"].to_list() == [1, 2, 3, 4, 5]
            assert table.full_reads == 1


async def test_the_slice_caption_names_an_integer_golden_value_as_an_integer(client, experiment):
    """The caption reads "value (272). Most runs", not "(272.0).Most runs"."""
    golden = experiment.replay.goldens[-1][1].flat["model_hidden_size"]
    page = (await client.get("/plots/slice", params={"parameter": "model_hidden_size"})).text
    assert f"golden configuration's value ({golden}). Most runs" in " ".join(page.split())


async def test_exports_are_built_two_at_a_time_and_a_third_is_told_to_wait(client):
    """L8: while two exports are being built (each in a thread, off the event loop), a third
    gets 503 with Retry-After, pages still answer, and once one is done exports work again."""
    from ax3l.reports.routes import runs

    for _ in range(runs.EXPORTS_AT_ONCE):
        assert runs._exports.acquire(blocking=False)
    try:
        busy = await client.get("/api/runs/export.csv")
        assert busy.status_code == 503 and busy.headers["retry-after"] == "5"
        assert "exports are being built" in busy.json()["message"]
        assert (await client.get("/api/runs", params={"limit": 1})).status_code == 200
    finally:
        for _ in range(runs.EXPORTS_AT_ONCE):
            runs._exports.release()
    assert (await client.get("/api/runs/export.parquet")).status_code == 200
