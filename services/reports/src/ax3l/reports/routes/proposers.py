"""``/proposers``: how each proposer (llm, tpe, random) has done, when more than one was used.

The leaderboards are folded from the events once and then from the new events only
(``queries/proposer_board.py``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from ax3l.reports.deps import DatabaseDep, PageDep, ProposerBoardDep, SettingsDep
from ax3l.reports.models.events import RefreshQuery
from ax3l.reports.models.proposers import ProposersOut

router = APIRouter(prefix="/api/proposers", tags=["proposers"])
pages = APIRouter(tags=["pages"])


@router.get("", response_model=ProposersOut)
async def list_proposers(
    db: DatabaseDep,
    settings: SettingsDep,
    board: ProposerBoardDep,
) -> ProposersOut:
    """Per proposer: conversations, accepted proposals, their completed runs' mean and best
    score, and how many became golden; turns taken as a fallback for a failing model
    (`fallback_turns`, `fallback_proposals`) and turns a model lost to the fallback
    (`turns_lost_to_fallback`). `compared` is true when more than one was used. `models` is
    the model leaderboard: per model its conversations, accepted proposals, wasted turns by
    kind, fallback turns, median/p95 seconds per request, completion tokens per accepted
    proposal and new goldens. `seats` is the seat leaderboard (outside agents of the
    `external` proposer): per seat its turns taken, accepted proposals, wasted submissions by
    kind, median seconds from a turn's opening to its accepted submission and new goldens."""
    found = await board.read(db, settings.llm_model)
    return ProposersOut(
        proposers=found.proposers,
        compared=len([s for s in found.proposers if s.proposer != "unknown"]) > 1,
        models=found.models,
        seats=found.seats,
    )


@pages.get("/proposers", response_class=HTMLResponse, summary="Proposer comparison page")
async def proposers_page(
    query: Annotated[RefreshQuery, Query()],
    db: DatabaseDep,
    settings: SettingsDep,
    board: ProposerBoardDep,
    page: PageDep,
) -> HTMLResponse:
    """A table comparing proposers when more than one has been used, and the models;
    ``refresh`` updates them in place every so many seconds. Under a hybrid (``llm+tpe``,
    ``llm+model``) a note says which rows' turns the LLM decided and which the classical
    proposer did (``AX3L_LLM_SHARE``)."""
    found = await list_proposers(db, settings, board)
    context = {"found": found, "refresh": query.refresh, "llm_share": settings.llm_share}
    return page.render("proposers.html", context)
