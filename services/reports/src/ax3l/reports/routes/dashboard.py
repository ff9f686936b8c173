"""The landing dashboard at ``/``; links into the event log's old home redirect to ``/events``."""

from __future__ import annotations

import asyncio
from typing import Annotated
from urllib.parse import urlencode

import polars as pl
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ax3l.reports.deps import (
    CurvesDep,
    CyclesDep,
    DatabaseDep,
    HighscoresDep,
    ModelsDep,
    MonitorDep,
    OrchestratorDep,
    PageDep,
    RunsTableDep,
    SchemaDep,
    SettingsDep,
)
from ax3l.reports.experiment_conclusion import fresh_seeds
from ax3l.reports.models.events import EventPageQuery, RefreshQuery
from ax3l.reports.models.runs import TUNED_COLUMNS
from ax3l.reports.queries.golden import golden_configurations
from ax3l.reports.queries.run_reasons import explained
from ax3l.reports.queries.runs import rows
from ax3l.reports.run_figures import history_figure
from ax3l.reports.status_report import build_status
from ax3l.shared.config_schema import dotted_paths
from ax3l.shared.registry import PARAMETER_ORDER

pages = APIRouter(tags=["pages"])

LAST_RUNS = 12
# The small history plot draws the most recent runs only (the full one is /plots/history).
HISTORY_RUNS = 2000
# The event log's query keys: a link made when the log lived at ``/`` still finds it.
# ``refresh`` alone is the dashboard's own selector now.
EVENT_LOG_KEYS = frozenset(EventPageQuery.model_fields) - frozenset(RefreshQuery.model_fields)


@pages.get("/", response_class=HTMLResponse, summary="Dashboard")
async def dashboard(
    request: Request,
    query: Annotated[RefreshQuery, Query()],
    db: DatabaseDep,
    monitor: MonitorDep,
    orchestrator: OrchestratorDep,
    cycles: CyclesDep,
    settings: SettingsDep,
    table: RunsTableDep,
    schema: SchemaDep,
    reader: HighscoresDep,
    curves: CurvesDep,
    models: ModelsDep,
    page: PageDep,
) -> Response:
    """The experiment's conclusion in one sentence (how the golden did on fresh seeds), the
    status cards, the golden configuration and its score with its fresh-seed record, the last
    runs, a small
    history plot, the turn the loop is on and links to every page; ``refresh`` updates them in
    place every so many seconds. A link with the event log's filters (``/?category=...``, from
    before the log moved) redirects to ``/events``."""
    asked = list(request.query_params.multi_items())
    if any(key in EVENT_LOG_KEYS for key, _ in asked):
        return RedirectResponse("/events?" + urlencode(asked), status_code=308)
    status, frame, golden_page, points = await asyncio.gather(
        build_status(db, monitor, cycles, settings.status_timeout, orchestrator),
        table.frame(db, schema),
        golden_configurations(db, limit=1),
        reader.points(db),
    )
    golden = golden_page.configurations[0] if golden_page.configurations else None
    flat = dotted_paths(golden.config) if golden is not None and golden.config else {}
    tuned = [
        (schema.by_column[column].path, flat.get(schema.by_column[column].path))
        for column in TUNED_COLUMNS
    ]
    recent = frame.tail(HISTORY_RUNS)
    start = int(recent["id"][0]) if recent.height else 0
    before = [p for p in points if p.simulations < start]
    shown = [p for p in points if p.simulations >= start]
    if before:  # the golden line starts at the plot's left edge with the score it had there
        shown.insert(0, before[-1].model_copy(update={"simulations": start}))
    last = await explained(db, frame, rows(frame.tail(LAST_RUNS).reverse()))
    model = await models.view(
        frame, schema, golden.config if golden else None, settings.model_lower_bound
    )
    turn = status.turn
    noted = await table.annotations(db, schema, [golden.run_id]) if golden and golden.run_id else {}
    golden_tags, golden_notes = noted.get(golden.run_id or "", ([], [])) if golden else ([], [])
    return page.render(
        "dashboard.html",
        {
            "status": status,
            "golden": golden,
            "golden_tags": golden_tags,
            "golden_notes": golden_notes,
            "model": model,
            "tuned": tuned,
            "fresh": fresh_seeds(points),
            "last_runs": last,
            "sparks": await curves.drawn(db, [(run.run_id, run.status) for run in last]),
            "runs": frame.height,
            "completed": frame.filter(pl.col("status") == "completed").height,
            "figure": history_figure(recent, shown, height=320, webgl=False),
            "history_runs": recent.height,
            "turn": turn,
            "turn_number": PARAMETER_ORDER.index(turn) + 1 if turn in PARAMETER_ORDER else None,
            "entries": len(PARAMETER_ORDER),
            "refresh": query.refresh,
        },
        headers={"Cache-Control": "no-store"},
    )
