"""``/proposers``: how each proposer (llm, tpe, random) has done, when more than one was used."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from ax3l.reports.deps import DatabaseDep, SettingsDep, TemplatesDep
from ax3l.reports.queries.proposers import model_stats, proposer_stats
from ax3l.reports.queries.seats import seat_stats

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


class ModelOut(BaseModel):
    model: str = Field(
        description="the `model` the server named in its replies, else AX3L_LLM_MODEL"
    )
    conversations: int
    accepted_proposals: int
    wasted_turns: int = Field(description="failed model requests and rejected proposals")
    wasted_kinds: dict[str, int] = Field(
        description="per `llm_request_failed` kind and per `proposal_rejected_*` event"
    )
    fallback_turns: int = Field(description="turns a fallback proposer took from it")
    requests: int = Field(description="requests with a known duration")
    median_seconds: float | None = Field(
        description="per request: llama-server's timings, else prompt to reply event"
    )
    p95_seconds: float | None
    completion_tokens: int
    completion_tokens_per_accepted: float | None
    new_goldens: int


class SeatOut(BaseModel):
    seat: str = Field(description="the seat's name (an outside agent of the external proposer)")
    calls: int = Field(description="tool calls at the seats' endpoint, refused ones included")
    refused_calls: int
    turns_taken: int = Field(description="turns in which it submitted at least once")
    accepted_proposals: int
    wasted_submissions: int = Field(description="submissions rejected or refused")
    wasted_kinds: dict[str, int] = Field(
        description="per rejection code (invalid_value, duplicate_config) and refusal reason"
    )
    median_seconds_to_submission: float | None = Field(
        description="from the turn's opening to its accepted submission"
    )
    new_goldens: int


class ProposersOut(BaseModel):
    proposers: list[ProposerOut]
    compared: bool
    models: list[ModelOut] = Field(description="the model leaderboard")
    seats: list[SeatOut] = Field(default_factory=list, description="the seat leaderboard")


async def read_proposers(db: DatabaseDep, settings: SettingsDep) -> ProposersOut:
    stats = await proposer_stats(db)
    models = await model_stats(db, settings.llm_model)
    return ProposersOut(
        proposers=[ProposerOut.model_validate(s, from_attributes=True) for s in stats],
        compared=len([s for s in stats if s.proposer != "unknown"]) > 1,
        models=[ModelOut.model_validate(m, from_attributes=True) for m in models],
        seats=[SeatOut.model_validate(s, from_attributes=True) for s in await seat_stats(db)],
    )


@router.get("", response_model=ProposersOut)
async def list_proposers(db: DatabaseDep, settings: SettingsDep) -> ProposersOut:
    """Per proposer: conversations, accepted proposals, their completed runs' mean and best
    score, and how many became golden; turns taken as a fallback for a failing model
    (`fallback_turns`, `fallback_proposals`) and turns a model lost to the fallback
    (`turns_lost_to_fallback`). `compared` is true when more than one was used. `models` is
    the model leaderboard: per model its conversations, accepted proposals, wasted turns by
    kind, fallback turns, median/p95 seconds per request, completion tokens per accepted
    proposal and new goldens. `seats` is the seat leaderboard (outside agents of the
    `external` proposer): per seat its turns taken, accepted proposals, wasted submissions by
    kind, median seconds from a turn's opening to its accepted submission and new goldens."""
    return await read_proposers(db, settings)


@pages.get("/proposers", response_class=HTMLResponse, summary="Proposer comparison page")
async def proposers_page(
    request: Request, db: DatabaseDep, settings: SettingsDep, templates: TemplatesDep
) -> HTMLResponse:
    """A table comparing proposers when more than one has been used, and the models."""
    return templates.TemplateResponse(
        request, "proposers.html", {"found": await read_proposers(db, settings)}
    )
