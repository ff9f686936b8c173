"""``/simulations/{run_id}``: a SnakeLab run's summary, config, episodes and best game."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query
from fastapi.responses import HTMLResponse

from ax3l.reports.board import SnapshotUnreadable, read_board
from ax3l.reports.deps import DatabaseDep, PageDep, SchemaDep
from ax3l.reports.event_contents import label
from ax3l.reports.figures import episodes_figure
from ax3l.reports.models.events import RefreshQuery
from ax3l.reports.models.simulations import Simulation
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
async def get_simulation(run_id: RunId, db: DatabaseDep, schema: SchemaDep) -> Simulation:
    """A run's row, its configuration (nested and as SnakeLab's columns), the best game's
    snapshot, its episodes and the Ax3l events of the run."""
    found = await simulation(db, schema, run_id)
    if found is None:
        raise HTTPException(404, f"SnakeLab has no run {run_id}")
    return found


@pages.get("/simulations/{run_id}", response_class=HTMLResponse, summary="Simulation page")
async def simulation_page(
    run_id: RunId,
    query: Annotated[RefreshQuery, Query()],
    db: DatabaseDep,
    schema: SchemaDep,
    page: PageDep,
) -> HTMLResponse:
    """Status, score, episodes, configuration and the board of the run's best game;
    ``refresh`` updates them in place every so many seconds (a run under way)."""
    found = await get_simulation(run_id, db, schema)
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
            "figure": episodes_figure(found.episodes) if found.episodes else None,
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
