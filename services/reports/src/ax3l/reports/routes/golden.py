"""``/golden-configurations``: each golden configuration, its score, what changed and why."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from ax3l.reports.deps import (
    DatabaseDep,
    ModelsDep,
    PageDep,
    RunsTableDep,
    SchemaDep,
    SettingsDep,
)
from ax3l.reports.models.golden import GoldenPage, GoldenPageQuery, GoldenQuery
from ax3l.reports.queries.golden import golden_configurations
from ax3l.reports.queries.runs import RunsTable
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database

router = APIRouter(prefix="/api/golden-configurations", tags=["golden configurations"])
pages = APIRouter(tags=["pages"])


@router.get("", response_model=GoldenPage)
async def list_golden(
    query: Annotated[GoldenQuery, Query()], db: DatabaseDep, table: RunsTableDep, schema: SchemaDep
) -> GoldenPage:
    """Golden configurations newest first, each with the differences from the one before it
    (`changes` is null for the first), the proposer of its run, as `/runs` names it, and its
    run's tags and notes. Page with `before=older_before`."""
    found = await golden_configurations(
        db, limit=query.limit, before=query.before, proposers=_proposers(db, table, schema)
    )
    return await _annotated(found, db, table, schema)


async def _annotated(
    found: GoldenPage, db: Database, table: RunsTable, schema: ConfigSchema
) -> GoldenPage:
    """``found`` with each golden's tags and notes (its run's)."""
    runs = [g.run_id for g in found.configurations if g.run_id]
    noted = await table.annotations(db, schema, runs)
    return found.model_copy(
        update={
            "configurations": [
                g.model_copy(update={"tags": noted[g.run_id][0], "notes": noted[g.run_id][1]})
                if g.run_id in noted
                else g
                for g in found.configurations
            ]
        }
    )


def _proposers(
    db: Database, table: RunsTable, schema: ConfigSchema
) -> Callable[[list[str]], Awaitable[dict[str, str]]]:
    return lambda run_ids: table.proposers(db, schema, run_ids)


@pages.get("/golden-configurations", response_class=HTMLResponse, summary="Golden page")
async def golden_page(
    query: Annotated[GoldenPageQuery, Query()],
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
    models: ModelsDep,
    settings: SettingsDep,
    page: PageDep,
) -> HTMLResponse:
    """Each golden configuration with its score, seed, the change that produced it and why,
    its run's tags and notes, and the model of every run's recommendation beside the current
    one; ``refresh`` updates the table in place every so many seconds."""
    found = await list_golden(query, db, table, schema)
    current = (await golden_configurations(db, limit=1)).configurations
    model = await models.view(
        await table.frame(db, schema),
        schema,
        current[0].config if current else None,
        settings.model_lower_bound,
    )
    return page.render(
        "golden.html",
        {"page": found, "query": query, "refresh": query.refresh, "model": model},
    )
