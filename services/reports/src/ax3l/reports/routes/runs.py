"""The runs table: ``/runs`` page, ``/api/runs`` JSON, CSV and Parquet downloads of a filter."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlencode

import polars as pl
from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import HTMLResponse, Response

from ax3l.reports.deps import CurvesDep, DatabaseDep, PageDep, RunsTableDep, SchemaDep
from ax3l.reports.figures import COMPARED_COLOURS, curves_figure, moving_average
from ax3l.reports.models.runs import (
    MAX_COMPARED,
    RUN_STATES,
    SORT_COLUMNS,
    TUNED_COLUMNS,
    ComparedCurve,
    RunsCompareQuery,
    RunsComparison,
    RunsPage,
    RunsPageQuery,
    RunsQuery,
    RunsViewQuery,
)
from ax3l.reports.queries.curves import episodes_of
from ax3l.reports.queries.run_reasons import explained
from ax3l.reports.queries.runs import (
    PATHS,
    BadCursor,
    chosen,
    differing,
    export_csv,
    export_parquet,
    page,
)
from ax3l.shared.db.database import Database
from ax3l.shared.registry import PARAMETER_ORDER

router = APIRouter(prefix="/api/runs", tags=["runs"])
pages = APIRouter(tags=["pages"])

LOOP_PURPOSES = ("seeding", "seed_rotation", "confirmation", "retry")
# Short headers of the tuned columns (their paths are the headers' titles).
SHORT = {
    "model_hidden_size": "hidden",
    "training_sequence_length": "seq len",
    "training_batch_size": "batch",
    "training_learning_rate": "lr",
    "training_gamma": "gamma",
    "epsilon_initial": "ε initial",
    "epsilon_decay": "ε decay",
    "game_rewards_closer_to_food": "closer",
    "game_rewards_further_from_food": "further",
}


async def read_page(db: Database, frame: pl.DataFrame, query: RunsPageQuery) -> RunsPage:
    """A page of the table, each run with who chose it and why."""
    try:
        found = page(frame, query)
    except BadCursor as exc:
        raise HTTPException(422, str(exc)) from None
    return found.model_copy(update={"runs": await explained(db, frame, found.runs)})


@router.get("", response_model=RunsPage)
async def list_runs(
    query: Annotated[RunsPageQuery, Query()],
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
) -> RunsPage:
    """Every SnakeLab run, one keyset page at a time.

    Filters combine: `status`, `seed`, `entry`, `proposer`, `golden`, `score_min`/`score_max`
    and `<column>_min`/`<column>_max` for each tuned value. `sort` (any column) and `order`
    set the order; ties go by run number. Page with `after=next_after` and
    `before=previous_before`: a cursor holds the last row's sort value and run number, so
    pages neither repeat nor skip a run when new runs arrive. Each run names its golden
    configuration of its time, the difference of their scores, what differs from it and,
    for a proposal, who chose it and why (`reason`).
    """
    return await read_page(db, await table.frame(db, schema), query)


def _download(body: bytes, media_type: str, name: str) -> Response:
    return Response(
        body,
        media_type=media_type,
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "Cache-Control": "no-store",
        },
    )


# Exports built at once; one more gets 503 (each is a whole table's file, built in a thread so
# the pages stay answered meanwhile).
EXPORTS_AT_ONCE = 2
_exports = threading.BoundedSemaphore(EXPORTS_AT_ONCE)


async def _export(
    build: Callable[[pl.DataFrame, RunsQuery], bytes], frame: pl.DataFrame, query: RunsQuery
) -> bytes:
    if not _exports.acquire(blocking=False):
        raise HTTPException(
            503,
            f"{EXPORTS_AT_ONCE} exports are being built; try again in a moment",
            headers={"Retry-After": "5"},
        )
    try:
        return await asyncio.to_thread(build, frame, query)
    finally:
        _exports.release()


@router.get("/export.csv", response_class=Response)
async def runs_csv(
    query: Annotated[RunsQuery, Query()], db: DatabaseDep, table: RunsTableDep, schema: SchemaDep
) -> Response:
    """Every run the filters match, in the asked order, as CSV (the API's columns); 503 while
    two exports are being built."""
    body = await _export(export_csv, await table.frame(db, schema), query)
    return _download(body, "text/csv; charset=utf-8", "ax3l-runs.csv")


@router.get("/export.parquet", response_class=Response)
async def runs_parquet(
    query: Annotated[RunsQuery, Query()], db: DatabaseDep, table: RunsTableDep, schema: SchemaDep
) -> Response:
    """Every run the filters match, in the asked order, as Parquet (the API's columns); 503
    while two exports are being built."""
    body = await _export(export_parquet, await table.frame(db, schema), query)
    return _download(body, "application/vnd.apache.parquet", "ax3l-runs.parquet")


@router.get("/compare", response_model=RunsComparison)
async def compare_runs(
    query: Annotated[RunsCompareQuery, Query()],
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
) -> RunsComparison:
    """Up to 8 runs side by side (`run`, repeated, in the order wanted): their rows as
    `/api/runs` gives them, the columns (seed, tuned values) in which they differ, and each
    one's learning curve (its 50-episode moving average). An id SnakeLab does not hold is a
    422 naming it."""
    frame = await table.frame(db, schema)
    runs, unknown = chosen(frame, query.run)
    if unknown:
        raise HTTPException(422, f"SnakeLab holds no run {', '.join(unknown)}")
    runs = await explained(db, frame, runs)
    episodes = await episodes_of(db, [run.run_id for run in runs])
    curves = [
        ComparedCurve(
            run_id=run.run_id,
            episodes=[e.episode for e in episodes[run.run_id]],
            average=moving_average([e.score for e in episodes[run.run_id]]),
        )
        for run in runs
        if episodes[run.run_id]
    ]
    return RunsComparison(runs=runs, differing=differing(runs), curves=curves)


def runs_url(path: str, query: RunsQuery, **changes: Any) -> str:
    """``path`` with the query's filters and order, some values changed (None drops one)."""
    values: dict[str, Any] = {**query.filters(), "sort": query.sort, "order": query.order}
    if isinstance(query, RunsPageQuery) and query.limit != 100:
        values["limit"] = query.limit
    if isinstance(query, RunsViewQuery) and query.refresh is not None:
        values["refresh"] = query.refresh
    values.update(changes)
    if values.get("sort") == "id" and values.get("order") == "desc":
        values.pop("sort"), values.pop("order")
    kept = {key: item for key, item in values.items() if item is not None}
    return path + ("?" + urlencode(kept) if kept else "")


def _choices(frame: pl.DataFrame, column: str) -> list[Any]:
    return sorted(v for v in frame[column].unique().to_list() if v is not None)


@pages.get("/runs", response_class=HTMLResponse, summary="Runs page")
async def runs_page(
    query: Annotated[RunsViewQuery, Query()],
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
    curves: CurvesDep,
    page: PageDep,
) -> HTMLResponse:
    """Every SnakeLab run with its seed, status, score and its difference from its golden of
    its time, what it tried, tuned values, proposer, entry, why, learning curve and golden
    flag; filters, sorting by any column, keyset pages and downloads of the filter;
    ``refresh`` updates the table in place every so many seconds."""
    frame = await table.frame(db, schema)
    found = await read_page(db, frame, query)
    entries = [*PARAMETER_ORDER, *LOOP_PURPOSES]
    entries += [e for e in _choices(frame, "entry") if e not in entries]
    sort_links = {
        column: runs_url(
            "/runs",
            query,
            sort=column,
            order="asc" if query.sort == column and query.order == "desc" else "desc",
        )
        for column in SORT_COLUMNS
    }
    return page.render(
        "runs.html",
        {
            "query": query,
            "refresh": query.refresh,
            "found": found,
            "sparks": await curves.drawn(db, [(run.run_id, run.status) for run in found.runs]),
            "max_compared": MAX_COMPARED,
            "tuned": TUNED_COLUMNS,
            "short": SHORT,
            "paths": {column: schema.by_column[column].path for column in TUNED_COLUMNS},
            "states": RUN_STATES,
            "entries": entries,
            "proposers": _choices(frame, "proposer"),
            "tags": sorted(frame["tags"].explode().drop_nulls().unique().to_list())
            if frame.height
            else [],
            "seeds": _choices(frame, "seed"),
            "sort_links": sort_links,
            "csv_url": runs_url("/api/runs/export.csv", query, limit=None, refresh=None),
            "parquet_url": runs_url("/api/runs/export.parquet", query, limit=None, refresh=None),
            "first_url": runs_url("/runs", query),
            "next_url": runs_url("/runs", query, after=found.next_after)
            if found.next_after
            else None,
            "previous_url": runs_url("/runs", query, before=found.previous_before)
            if found.previous_before
            else None,
        },
        headers={"Cache-Control": "no-store"},
    )


@pages.get("/runs/compare", response_class=HTMLResponse, summary="Runs side by side")
async def compare_page(
    query: Annotated[RunsCompareQuery, Query()],
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
    page: PageDep,
) -> HTMLResponse:
    """Up to 8 runs chosen on `/runs`, side by side: each value, marked where they differ,
    what each tried against its golden configuration of its time, who chose it and why, and
    their learning curves overlaid; ``refresh`` updates them in place (a run under way)."""
    found = await compare_runs(query, db, table, schema)
    names = {run.run_id: f"run {run.id} ({run.run_id[:8]})" for run in found.runs}
    by_run = {curve.run_id: curve for curve in found.curves}
    figure = (
        curves_figure(
            [
                (i, names[run.run_id], by_run[run.run_id].episodes, by_run[run.run_id].average)
                for i, run in enumerate(found.runs)
                if run.run_id in by_run
            ]
        )
        if found.curves
        else None
    )
    return page.render(
        "runs_compare.html",
        {
            "found": found,
            "figure": figure,
            "colours": COMPARED_COLOURS,
            "values": [(column, PATHS[column]) for column in ("seed", *TUNED_COLUMNS)],
            "paths": PATHS,
            "short": SHORT,
            "max_compared": MAX_COMPARED,
            "refresh": query.refresh,
        },
        headers={"Cache-Control": "no-store"},
    )
