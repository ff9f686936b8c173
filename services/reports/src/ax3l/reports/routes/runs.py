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

from ax3l.reports.deps import DatabaseDep, PageDep, RunsTableDep, SchemaDep
from ax3l.reports.models.runs import (
    RUN_STATES,
    SORT_COLUMNS,
    TUNED_COLUMNS,
    RunsPage,
    RunsPageQuery,
    RunsQuery,
    RunsViewQuery,
)
from ax3l.reports.queries.runs import BadCursor, export_csv, export_parquet, page
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


def read_page(frame: pl.DataFrame, query: RunsPageQuery) -> RunsPage:
    try:
        return page(frame, query)
    except BadCursor as exc:
        raise HTTPException(422, str(exc)) from None


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
    pages neither repeat nor skip a run when new runs arrive.
    """
    return read_page(await table.frame(db, schema), query)


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
    page: PageDep,
) -> HTMLResponse:
    """Every SnakeLab run with its seed, status, score, tuned values, proposer, entry and
    golden flag; filters, sorting by any column, keyset pages and downloads of the filter;
    ``refresh`` updates the table in place every so many seconds."""
    frame = await table.frame(db, schema)
    found = read_page(frame, query)
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
            "tuned": TUNED_COLUMNS,
            "short": SHORT,
            "paths": {column: schema.by_column[column].path for column in TUNED_COLUMNS},
            "states": RUN_STATES,
            "entries": entries,
            "proposers": _choices(frame, "proposer"),
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
