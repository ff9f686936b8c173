"""``/comparison``: ``ax3l-compare``'s repeated experiments, per proposer, with the uncertainty.

Per proposer: the median best-so-far against SnakeLab's run count inside a 95% band over the
repeats, P(beats random) at the budget, the median runs needed to reach a score the user
picks (``target``), and wasted turns per accepted proposal.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from ax3l.reports.deps import DatabaseDep, TemplatesDep
from ax3l.reports.figures import comparison_figure
from ax3l.reports.models import QueryModel
from ax3l.reports.queries.comparison import (
    default_target,
    list_comparisons,
    read_repeats,
    summarise,
)

router = APIRouter(prefix="/api/comparison", tags=["comparison"])
pages = APIRouter(tags=["pages"])


class ComparisonQuery(QueryModel):
    comparison: int | None = Field(
        None, ge=1, description="the comparison's id (default: the latest)"
    )
    target: float | None = Field(
        None,
        ge=0,
        le=1_000_000,
        description="the score for 'simulations to reach' (default: random's median best)",
    )


class ComparisonInfo(BaseModel):
    comparison_id: int
    started_at: datetime
    finished_at: datetime | None
    state: str = Field(description="running, finished, partial (a repeat failed) or failed")
    proposers: list[str]
    repeats: int = Field(description="repeats asked for per proposer")
    budget: int = Field(description="SnakeLab runs per repeat, the seeding run included")
    wall_seconds: float | None = Field(description="wall time of the whole comparison")
    content: dict[str, Any] = Field(description="seeds, parallelism, model server and settings")


class CurvePointOut(BaseModel):
    simulations: int
    median: float
    low: float = Field(description="2.5th percentile over repeats")
    high: float = Field(description="97.5th percentile over repeats")
    repeats: int = Field(description="repeats with a score after this many runs")


class ProposerSummaryOut(BaseModel):
    proposer: str
    repeats: int = Field(description="finished repeats")
    failed: int
    curve: list[CurvePointOut]
    final_median: float | None = Field(description="median best at the budget")
    final_low: float | None
    final_high: float | None
    p_beats_random: float | None = Field(
        description="P(a repeat of it ends above one of random's), ties half"
    )
    median_simulations_to_target: float | None = Field(
        description="median runs to reach `target`; null when half the repeats never did"
    )
    reached_target: int = Field(description="repeats that reached `target`")
    accepted_proposals: int
    wasted_turns: int = Field(description="rejected proposals and failed model requests")
    wasted_per_accepted: float | None
    wasted_kinds: dict[str, int]
    median_wall_seconds: float | None


class RepeatOut(BaseModel):
    proposer: str
    repeat_index: int
    seed: int
    state: str
    runs: int
    best_score: int | None
    best_so_far: list[int | None]
    accepted_proposals: int
    model_turns: int
    wasted_turns: int
    wall_seconds: float
    error: str | None


class ComparisonOut(BaseModel):
    comparison: ComparisonInfo | None
    comparisons: list[int] = Field(description="every comparison's id, newest first")
    target: float | None
    proposers: list[ProposerSummaryOut]
    repeats: list[RepeatOut]


async def read_comparison(db: DatabaseDep, query: ComparisonQuery) -> ComparisonOut:
    found = await list_comparisons(db)
    ids = [c.comparison_id for c in found]
    if not found:
        return ComparisonOut(comparison=None, comparisons=[], target=None, proposers=[], repeats=[])
    if query.comparison is None:
        chosen = found[0]
    else:
        matching = [c for c in found if c.comparison_id == query.comparison]
        if not matching:
            raise HTTPException(404, f"there is no comparison {query.comparison}")
        chosen = matching[0]
    repeats = await read_repeats(db, chosen.comparison_id)
    target = query.target if query.target is not None else default_target(chosen, repeats)
    summaries = summarise(chosen, repeats, target)
    return ComparisonOut(
        comparison=ComparisonInfo.model_validate(chosen, from_attributes=True),
        comparisons=ids,
        target=target,
        proposers=[ProposerSummaryOut.model_validate(s, from_attributes=True) for s in summaries],
        repeats=[RepeatOut.model_validate(r, from_attributes=True) for r in repeats],
    )


@router.get("", response_model=ComparisonOut)
async def get_comparison(
    query: Annotated[ComparisonQuery, Query()], db: DatabaseDep
) -> ComparisonOut:
    """A comparison (`comparison`, default the latest) of `ax3l-compare`: per proposer the
    median best-so-far curve with its 95% band over repeats, the median best at the budget,
    P(beats random), the median runs to reach `target` and wasted turns per accepted proposal;
    every repeat's curve. Without any comparison, `comparison` is null."""
    return await read_comparison(db, query)


@pages.get("/comparison", response_class=HTMLResponse, summary="Proposer comparison page")
async def comparison_page(
    request: Request,
    query: Annotated[ComparisonQuery, Query()],
    db: DatabaseDep,
    templates: TemplatesDep,
) -> HTMLResponse:
    """Repeated experiments per proposer: curves with their band, and the table."""
    found = await read_comparison(db, query)
    figure = None
    if found.comparison is not None:
        figure = comparison_figure(
            [(p.proposer, p.curve) for p in found.proposers if p.curve],
            found.comparison.budget,
            found.target,
        )
    return templates.TemplateResponse(
        request, "comparison.html", {"found": found, "figure": figure, "query": query}
    )
