"""``/proposers``: how each proposer (llm, tpe, random) has done, when more than one was used."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

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
    fallback_turns: int = Field(description="turns it took because the model failed them")
    fallback_proposals: int = Field(description="accepted proposals of those fallback turns")
    turns_lost_to_fallback: int = Field(
        description="turns it failed that a fallback proposer then took"
    )


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
    score, and how many became golden; turns taken as a fallback for a failing model
    (`fallback_turns`, `fallback_proposals`) and turns a model lost to the fallback
    (`turns_lost_to_fallback`). `compared` is true when more than one was used."""
    return await read_proposers(db)


@pages.get("/proposers", response_class=HTMLResponse, summary="Proposer comparison page")
async def proposers_page(
    request: Request, db: DatabaseDep, templates: TemplatesDep
) -> HTMLResponse:
    """A table comparing proposers when more than one has been used."""
    return templates.TemplateResponse(
        request, "proposers.html", {"found": await read_proposers(db)}
    )
