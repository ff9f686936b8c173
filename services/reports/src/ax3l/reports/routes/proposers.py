"""``/proposers``: how each proposer (llm, tpe, random) has done, when more than one was used."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from ax3l.reports.deps import DatabaseDep, TemplatesDep
from ax3l.reports.queries.proposers import proposer_stats

router = APIRouter(prefix="/api/proposers", tags=["proposers"])
pages = APIRouter(tags=["pages"])


class ProposerOut(BaseModel):
    proposer: str
    conversations: int
    proposals: int
    scored_runs: int
    mean_score: float | None
    best_score: int | None
    new_goldens: int


class ProposersOut(BaseModel):
    proposers: list[ProposerOut]
    compared: bool


async def read_proposers(db: DatabaseDep) -> ProposersOut:
    stats = await proposer_stats(db)
    return ProposersOut(
        proposers=[ProposerOut.model_validate(s, from_attributes=True) for s in stats],
        compared=len([s for s in stats if s.proposer != "unknown"]) > 1,
    )


@router.get("", response_model=ProposersOut)
async def list_proposers(db: DatabaseDep) -> ProposersOut:
    """Per proposer: conversations, accepted proposals, their completed runs' mean and best
    score, and how many became golden. `compared` is true when more than one was used."""
    return await read_proposers(db)


@pages.get("/proposers", response_class=HTMLResponse, summary="Proposer comparison page")
async def proposers_page(
    request: Request, db: DatabaseDep, templates: TemplatesDep
) -> HTMLResponse:
    """A table comparing proposers when more than one has been used."""
    return templates.TemplateResponse(
        request, "proposers.html", {"found": await read_proposers(db)}
    )
