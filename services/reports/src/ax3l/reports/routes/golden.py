"""``/golden-configurations``: each golden configuration, its score, what changed and why."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from ax3l.reports.deps import DatabaseDep, TemplatesDep
from ax3l.reports.models import GoldenOut, GoldenQuery
from ax3l.reports.queries.golden import golden_entries

router = APIRouter(prefix="/api/golden-configurations", tags=["golden configurations"])
pages = APIRouter(tags=["pages"])


class ChangeOut(BaseModel):
    path: str
    before: Any
    after: Any


class GoldenEntryOut(GoldenOut):
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
                **asdict(e.golden),
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
