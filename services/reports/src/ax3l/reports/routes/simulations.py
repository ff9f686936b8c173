"""``/simulations/{run_id}``: a SnakeLab run's summary, config, episodes and best game."""

from __future__ import annotations

from typing import Annotated

import polars as pl
from fastapi import APIRouter, HTTPException, Path, Query
from fastapi.responses import HTMLResponse

from ax3l.reports.board import SnapshotUnreadable, read_board
from ax3l.reports.deps import DatabaseDep, PageDep, RunsTableDep, SchemaDep
from ax3l.reports.event_contents import label
from ax3l.reports.figures import episodes_figure
from ax3l.reports.models.events import RefreshQuery
from ax3l.reports.models.simulations import Simulation
from ax3l.reports.queries.curves import episodes_of
from ax3l.reports.queries.run_reasons import conversations_of, model_figures, run_reasons
from ax3l.reports.queries.runs import GOLDEN_PREFIX, PATHS, rows, with_changes
from ax3l.reports.queries.simulations import simulation
from ax3l.shared.wire import TERMINAL_STATES

router = APIRouter(prefix="/api/simulations", tags=["simulations"])
pages = APIRouter(tags=["pages"])

RunId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=36,
        pattern=r"^[A-Za-z0-9-]+$",
        description="SnakeLab's run_id (a uuid4)",
    ),
]


@router.get("/{run_id}", response_model=Simulation)
async def get_simulation(
    run_id: RunId, db: DatabaseDep, schema: SchemaDep, table: RunsTableDep
) -> Simulation:
    """A run's row, its configuration (nested and as SnakeLab's columns), the best game's
    snapshot, its episodes, the Ax3l events of the run (each with its sentence), its row of the
    runs table (who proposed it, its golden configuration of its time, what differs from it,
    the score difference) and who chose it and why (`reason`: the model's reasoning, the
    `model` proposer's figures, a fallback's cause, the seat)."""
    found = await simulation(db, schema, run_id)
    if found is None:
        raise HTTPException(404, f"SnakeLab has no run {run_id}")
    frame = await table.frame(db, schema)
    mine = frame.filter(pl.col("run_id") == run_id) if frame.height else frame
    reasons = await run_reasons(db, conversations_of(frame, [run_id]))
    reason = reasons.get(run_id)
    row = None
    if mine.height:
        row = rows(mine)[0]
        if reason is not None:
            row = row.model_copy(update={"seat": reason.seat, "reason": reason.summary})
    return found.model_copy(update={"row": row, "reason": reason})


def _tried(table_row: dict[str, object], changed: list[str]) -> list[tuple[str, object, object]]:
    """``(path, golden's value, the run's)`` of each column that differs from its golden."""
    return [(PATHS[c], table_row.get(GOLDEN_PREFIX + c), table_row.get(c)) for c in changed]


@pages.get("/simulations/{run_id}", response_class=HTMLResponse, summary="Simulation page")
async def simulation_page(
    run_id: RunId,
    query: Annotated[RefreshQuery, Query()],
    db: DatabaseDep,
    schema: SchemaDep,
    table: RunsTableDep,
    page: PageDep,
) -> HTMLResponse:
    """Status, score, what the run tried against its golden configuration of its time, who
    chose it and why, its learning curve (beside its golden's), configuration, the board of its
    best game and its events in sentences; ``refresh`` updates them in place every so many
    seconds (a run under way)."""
    found = await get_simulation(run_id, db, schema, table)
    row = found.row
    golden_curve = None
    tried: list[tuple[str, object, object]] = []
    if row is not None and row.golden_run_id:
        golden_curve = (await episodes_of(db, [row.golden_run_id]))[row.golden_run_id]
        frame = await table.frame(db, schema)
        table_row = with_changes(frame.filter(pl.col("run_id") == run_id)).to_dicts()[0]
        tried = _tried(table_row, row.changed)
    golden_name = (
        f"Golden of its time (run {row.golden_run_id[:8]})" if row and row.golden_run_id else ""
    )
    board, board_problem = None, None
    if found.snapshot is not None:
        try:
            board = read_board(found.snapshot)
        except SnapshotUnreadable as exc:
            board_problem = str(exc)
    return page.render(
        "simulation.html",
        {
            "sim": found,
            "run": found.run,
            "board": board,
            "board_problem": board_problem,
            "figure": episodes_figure(
                found.episodes, (golden_name, golden_curve) if golden_curve else None
            )
            if found.episodes
            else None,
            "row": row,
            "reason": found.reason,
            "tried": tried,
            "model_figures": model_figures(found.reason),
            "leaves": [
                (leaf.path, found.flat_config.get(leaf.column))
                for leaf in schema.leaves
                if found.flat_config is not None and leaf.column in found.flat_config
            ],
            "label": label,
            # The live default only for a run under way.
            "refresh": 0
            if query.refresh is None and found.run.status in TERMINAL_STATES
            else query.refresh,
        },
    )
