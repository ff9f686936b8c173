"""Plots of every run: ``/plots/history``, ``/plots/slice``, ``/plots/parallel`` and
``/plots/importance`` (with ``/api/plots/importance``)."""

from __future__ import annotations

from typing import Annotated, Literal

import polars as pl
from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse
from pydantic import Field, field_validator

from ax3l.reports.deps import (
    DatabaseDep,
    HighscoresDep,
    ImportanceDep,
    ModelsDep,
    PageDep,
    RunsTableDep,
    SchemaDep,
    SettingsDep,
)
from ax3l.reports.models.parameters import QueryModel
from ax3l.reports.models.runs import TUNED_COLUMNS
from ax3l.reports.queries.golden import golden_configurations
from ax3l.reports.queries.importance import Importance
from ax3l.reports.run_figures import (
    bar_figure,
    effect_figure,
    history_figure,
    parallel_figure,
    parallel_lines_figure,
    slice_figure,
)
from ax3l.shared.config_schema import ConfigSchema, dotted_paths

router = APIRouter(prefix="/api/plots", tags=["plots"])
pages = APIRouter(tags=["pages"])

# Parallel coordinates draw one line per run: beyond this many the most recent are drawn.
PARALLEL_RUNS = 20_000
PLOTS = (
    ("history", "History"),
    ("slice", "Slice"),
    ("parallel", "Parallel coordinates"),
    ("importance", "Importance"),
)


class PlotQuery(QueryModel):
    seed: int | None = Field(None, ge=0, le=2**63 - 1, description="only runs with this seed")


class ParallelQuery(PlotQuery):
    interactive: bool = Field(
        False,
        description="plotly's parcoords (WebGL: drag along an axis to select a range; seconds"
        " to draw without a GPU) instead of SVG lines",
    )

    @field_validator("interactive", mode="before")
    @classmethod
    def _default_off(cls, value: object) -> object:
        return False if value is None else value


class HistoryQuery(QueryModel):
    x: Literal["runs", "time"] = Field("runs", description="x axis: run number or time")

    @field_validator("x", mode="before")
    @classmethod
    def _default(cls, value: object) -> object:
        return "runs" if value is None else value


class SliceQuery(PlotQuery):
    parameter: str = Field(TUNED_COLUMNS[0], description="the tuned value's column")

    @field_validator("parameter", mode="before")
    @classmethod
    def _tuned(cls, value: object) -> object:
        if value is None:
            return TUNED_COLUMNS[0]
        if value not in TUNED_COLUMNS:
            raise ValueError(f"unknown parameter {value!r}; tuned: {', '.join(TUNED_COLUMNS)}")
        return value


def _paths(schema: ConfigSchema) -> dict[str, str]:
    return {column: schema.by_column[column].path for column in TUNED_COLUMNS}


def _seeds(frame: pl.DataFrame) -> list[int]:
    return sorted(s for s in frame["seed"].unique().to_list() if s is not None)


def _by_seed(frame: pl.DataFrame, seed: int | None) -> pl.DataFrame:
    return frame if seed is None else frame.filter(pl.col("seed") == seed)


@pages.get("/plots", include_in_schema=False)
@pages.get("/plots/history", response_class=HTMLResponse, summary="History plot page")
async def history_page(
    query: Annotated[HistoryQuery, Query()],
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
    reader: HighscoresDep,
    page: PageDep,
) -> HTMLResponse:
    """Every run's high score against its run number or time, the golden score as a step line
    and seed changes as dotted lines."""
    frame = await table.frame(db, schema)
    points = await reader.points(db)
    figure = history_figure(frame, points, by_time=query.x == "time")
    return page.render(
        "plots.html",
        {"kind": "history", "plots": PLOTS, "query": query, "figure": figure, "runs": frame.height},
    )


@pages.get("/plots/slice", response_class=HTMLResponse, summary="Slice plot page")
async def slice_page(
    query: Annotated[SliceQuery, Query()],
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
    page: PageDep,
) -> HTMLResponse:
    """The high score of every completed run against one tuned value, coloured by seed, the
    golden configuration's value marked."""
    whole = await table.frame(db, schema)
    frame = _by_seed(whole, query.seed)
    paths = _paths(schema)
    golden = (await golden_configurations(db, limit=1)).configurations
    value = dotted_paths(golden[0].config).get(paths[query.parameter]) if golden else None
    # An integer stays one: the caption says 224, not 224.0.
    golden_value = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    return page.render(
        "plots.html",
        {
            "kind": "slice",
            "plots": PLOTS,
            "query": query,
            "paths": paths,
            "seeds": _seeds(whole),
            "golden_value": golden_value,
            "figure": slice_figure(frame, query.parameter, paths[query.parameter], golden_value),
            "runs": frame.height,
        },
    )


@pages.get("/plots/parallel", response_class=HTMLResponse, summary="Parallel coordinates page")
async def parallel_page(
    query: Annotated[ParallelQuery, Query()],
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
    page: PageDep,
) -> HTMLResponse:
    """Parallel coordinates of the nine tuned values and the high score (completed runs): SVG
    lines by score band, or with ``interactive`` plotly's parcoords (WebGL, brushable)."""
    whole = await table.frame(db, schema)
    done = _by_seed(whole, query.seed).filter(pl.col("status") == "completed")
    shown = done.tail(PARALLEL_RUNS)
    return page.render(
        "plots.html",
        {
            "kind": "parallel",
            "plots": PLOTS,
            "query": query,
            "seeds": _seeds(whole),
            "figure": (parallel_figure if query.interactive else parallel_lines_figure)(
                shown, TUNED_COLUMNS, _paths(schema)
            ),
            "basic_bundle": not query.interactive,
            "runs": shown.height,
            "completed": done.height,
            "cap": PARALLEL_RUNS,
        },
    )


@router.get("/importance", response_model=Importance)
async def get_importance(
    db: DatabaseDep, table: RunsTableDep, schema: SchemaDep, cache: ImportanceDep
) -> Importance:
    """Per round-robin entry its runs and the new golden configurations they produced, and
    Optuna's PED-ANOVA importances of the tuned values for the high score (the most recent
    completed runs). One-at-a-time data limits what importances can say: see the page."""
    return await cache.importance(await table.frame(db, schema), schema)


@pages.get("/plots/importance", response_class=HTMLResponse, summary="Importance page")
async def importance_page(
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
    cache: ImportanceDep,
    models: ModelsDep,
    settings: SettingsDep,
    page: PageDep,
) -> HTMLResponse:
    """Which entries produced improvements, Optuna's importances with their caveat, and what
    the model of every run says about each tuned value (its effect curve and the runs)."""
    found = await get_importance(db, table, schema, cache)
    effects = await models.effects(
        await table.frame(db, schema), schema, settings.model_lower_bound
    )
    entries = found.entries
    figure = bar_figure(
        [e.entry for e in entries],
        [e.improvements for e in entries],
        "New golden configurations",
        "%{y}: %{x} new golden configurations<extra></extra>",
    )
    parameters = (
        bar_figure(
            [p.path for p in found.parameters],
            [round(p.importance, 4) for p in found.parameters],
            "Importance (PED-ANOVA, sums to 1)",
            "%{y}: %{x}<extra></extra>",
        )
        if found.parameters
        else None
    )
    return page.render(
        "plots.html",
        {
            "kind": "importance",
            "plots": PLOTS,
            "found": found,
            "figure": figure,
            "parameters_figure": parameters,
            "effects": effects,
            "effect_figures": [effect_figure(e) for e in effects.effects],
        },
    )
