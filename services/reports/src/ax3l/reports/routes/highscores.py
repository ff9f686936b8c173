"""``/experiment-highscores``: accepted golden scores against SnakeLab's run count."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from ax3l.reports.deps import DatabaseDep, HighscoresDep, PageDep
from ax3l.reports.figures import highscore_figure, seed_changes
from ax3l.reports.models.events import RefreshQuery
from ax3l.reports.models.highscores import Highscores
from ax3l.reports.queries.highscores import highscore_series

router = APIRouter(prefix="/api/highscores", tags=["highscores"])
TABLE_ROWS = 100
pages = APIRouter(tags=["pages"])


@router.get("", response_model=Highscores)
async def list_highscores(db: DatabaseDep, reader: HighscoresDep) -> Highscores:
    """Every `experiment_highscores` row (score, seed, SnakeLab's run count at acceptance) with
    its golden event's run and reason, in acceptance order, and the current run count."""
    return await highscore_series(db, reader)


@pages.get("/experiment-highscores", response_class=HTMLResponse, summary="High score page")
async def highscores_page(
    query: Annotated[RefreshQuery, Query()], db: DatabaseDep, reader: HighscoresDep, page: PageDep
) -> HTMLResponse:
    """A step line of accepted golden scores against the total simulation count, flat through
    unsuccessful or pending submissions up to the current count, seed changes marked;
    ``refresh`` updates the plot and table in place every so many seconds."""
    found = await highscore_series(db, reader)
    points, current = found.points, found.current_simulations
    return page.render(
        "highscores.html",
        {
            "points": points,
            "recent": list(reversed(points[-TABLE_ROWS:])),
            "current": current,
            "figure": highscore_figure(points, current),
            "seed_changes": {p.event_id for p in seed_changes(points)},
            "refresh": query.refresh,
        },
    )
