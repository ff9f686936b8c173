"""``/experiment-highscores``: accepted golden scores against SnakeLab's run count."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from ax3l.reports.deps import DatabaseDep, HighscoresDep, TemplatesDep
from ax3l.reports.figures import highscore_figure, seed_changes
from ax3l.reports.queries.highscores import highscore_series

router = APIRouter(prefix="/api/highscores", tags=["highscores"])
TABLE_ROWS = 100
pages = APIRouter(tags=["pages"])


class HighscorePointOut(BaseModel):
    event_id: int
    occurred_at: datetime
    simulations: int
    score: int
    seed: int | None
    run_id: str | None
    reason: str | None


class HighscoresOut(BaseModel):
    points: list[HighscorePointOut]
    current_simulations: int


@router.get("", response_model=HighscoresOut)
async def list_highscores(db: DatabaseDep, reader: HighscoresDep) -> HighscoresOut:
    """Every `experiment_highscores` row (score, seed, SnakeLab's run count at acceptance) with
    its golden event's run and reason, in acceptance order, and the current run count."""
    points, current = await highscore_series(db, reader)
    return HighscoresOut(
        points=[HighscorePointOut.model_validate(p, from_attributes=True) for p in points],
        current_simulations=current,
    )


@pages.get("/experiment-highscores", response_class=HTMLResponse, summary="High score page")
async def highscores_page(
    request: Request, db: DatabaseDep, reader: HighscoresDep, templates: TemplatesDep
) -> HTMLResponse:
    """A step line of accepted golden scores against the total simulation count, flat through
    unsuccessful or pending submissions up to the current count, seed changes marked."""
    points, current = await highscore_series(db, reader)
    return templates.TemplateResponse(
        request,
        "highscores.html",
        {
            "points": points,
            "recent": list(reversed(points[-TABLE_ROWS:])),
            "current": current,
            "figure": highscore_figure(points, current),
            "seed_changes": {p.event_id for p in seed_changes(points)},
        },
    )
