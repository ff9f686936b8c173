"""``/score-distribution``: a histogram of SnakeLab run high scores."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from ax3l.reports.deps import DatabaseDep, PageDep
from ax3l.reports.figures import score_figure
from ax3l.reports.models.scores import ScoreDistribution, ScoreQuery
from ax3l.reports.queries.scores import score_distribution, seeds
from ax3l.shared.wire import TERMINAL_STATES

router = APIRouter(prefix="/api/score-distribution", tags=["score distribution"])
pages = APIRouter(tags=["pages"])

STATES = ("completed", "failed", "cancelled", "queued", "running", "paused", "cancelling")


@router.get("", response_model=ScoreDistribution)
async def get_score_distribution(
    query: Annotated[ScoreQuery, Query()], db: DatabaseDep
) -> ScoreDistribution:
    """How many runs reached each high score; `status` (default completed, empty for any)
    and `seed` narrow the runs."""
    return await score_distribution(db, status=query.status, seed=query.seed)


@pages.get("/score-distribution", response_class=HTMLResponse, summary="Score histogram page")
async def scores_page(
    query: Annotated[ScoreQuery, Query()], db: DatabaseDep, page: PageDep
) -> HTMLResponse:
    """A histogram of run high scores with summary figures."""
    found = await get_score_distribution(query, db)
    return page.render(
        "scores.html",
        {
            "found": found,
            "query": query,
            "figure": score_figure([(b.score, b.runs) for b in found.bins]),
            "states": STATES,
            "terminal": TERMINAL_STATES,
            "seeds": await seeds(db),
        },
    )
