"""``/golden-configurations``: each golden configuration, its score, what changed and why."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from ax3l.reports.deps import DatabaseDep, TemplatesDep
from ax3l.reports.models import GoldenQuery
from ax3l.reports.queries.golden import golden_entries

router = APIRouter(prefix="/api/golden-configurations", tags=["golden configurations"])
pages = APIRouter(tags=["pages"])


class ChangeOut(BaseModel):
    path: str
    before: Any
    after: Any


class GoldenEntryOut(BaseModel):
    event_id: int
    occurred_at: datetime
    run_id: str | None
    high_score: int | None
    seed: int | None
    simulations: int | None
    reason: str | None
    proposer: str | None
    config: dict[str, Any] | None
    changes: list[ChangeOut] | None


class GoldenPageOut(BaseModel):
    configurations: list[GoldenEntryOut]
    older_before: int | None


async def read_golden(db: DatabaseDep, query: GoldenQuery) -> GoldenPageOut:
    entries, older = await golden_entries(db, limit=query.limit, before=query.before)
    return GoldenPageOut(
        configurations=[
            GoldenEntryOut(
                event_id=e.golden.event_id,
                occurred_at=e.golden.occurred_at,
                run_id=e.golden.run_id,
                high_score=e.golden.high_score,
                seed=e.golden.seed,
                simulations=e.golden.simulations,
                reason=e.golden.reason,
                proposer=e.proposer,
                config=e.config,
                changes=None
                if e.changes is None
                else [ChangeOut(path=c.path, before=c.before, after=c.after) for c in e.changes],
            )
            for e in entries
        ],
        older_before=older,
    )


@router.get("", response_model=GoldenPageOut)
async def list_golden(query: Annotated[GoldenQuery, Query()], db: DatabaseDep) -> GoldenPageOut:
    """Golden configurations newest first, each with the differences from the one before it
    (`changes` is null for the first). Page with `before=older_before`."""
    return await read_golden(db, query)


@pages.get("/golden-configurations", response_class=HTMLResponse, summary="Golden page")
async def golden_page(
    request: Request,
    query: Annotated[GoldenQuery, Query()],
    db: DatabaseDep,
    templates: TemplatesDep,
) -> HTMLResponse:
    """Each golden configuration with its score, seed, the change that produced it and why."""
    page = await read_golden(db, query)
    return templates.TemplateResponse(request, "golden.html", {"page": page, "query": query})
