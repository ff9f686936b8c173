"""``/golden-configurations``: each golden configuration, its score, what changed and why."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from ax3l.reports.deps import DatabaseDep, PageDep
from ax3l.reports.models.golden import GoldenPage, GoldenPageQuery, GoldenQuery
from ax3l.reports.queries.golden import golden_configurations

router = APIRouter(prefix="/api/golden-configurations", tags=["golden configurations"])
pages = APIRouter(tags=["pages"])


@router.get("", response_model=GoldenPage)
async def list_golden(query: Annotated[GoldenQuery, Query()], db: DatabaseDep) -> GoldenPage:
    """Golden configurations newest first, each with the differences from the one before it
    (`changes` is null for the first). Page with `before=older_before`."""
    return await golden_configurations(db, limit=query.limit, before=query.before)


@pages.get("/golden-configurations", response_class=HTMLResponse, summary="Golden page")
async def golden_page(
    query: Annotated[GoldenPageQuery, Query()], db: DatabaseDep, page: PageDep
) -> HTMLResponse:
    """Each golden configuration with its score, seed, the change that produced it and why;
    ``refresh`` updates the table in place every so many seconds."""
    found = await golden_configurations(db, limit=query.limit, before=query.before)
    return page.render("golden.html", {"page": found, "query": query, "refresh": query.refresh})
