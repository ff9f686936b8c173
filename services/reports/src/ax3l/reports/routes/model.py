"""The model of every run: ``/api/model/recommendation`` and ``/api/model/effects`` (the pages
show them on the dashboard, ``/golden-configurations`` and ``/plots/importance``)."""

from __future__ import annotations

from fastapi import APIRouter

from ax3l.reports.deps import DatabaseDep, ModelsDep, RunsTableDep, SchemaDep, SettingsDep
from ax3l.reports.queries.golden import golden_configurations
from ax3l.reports.queries.run_model import Effects, ModelView

router = APIRouter(prefix="/api/model", tags=["model"])
pages = APIRouter(tags=["pages"])


@router.get("/recommendation", response_model=ModelView)
async def get_recommendation(
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
    models: ModelsDep,
    settings: SettingsDep,
) -> ModelView:
    """The configuration the model of every run predicts best among those with completed runs
    (its mean over seeds ± sd, its runs and seeds), and the golden configuration as the model
    sees it. A noisy single run can make a golden; the model weighs every run."""
    golden = (await golden_configurations(db, limit=1)).configurations
    config = golden[0].config if golden else None
    frame = await table.frame(db, schema)
    return await models.view(frame, schema, config, settings.model_lower_bound)


@router.get("/effects", response_model=Effects)
async def get_effects(
    db: DatabaseDep,
    table: RunsTableDep,
    schema: SchemaDep,
    models: ModelsDep,
    settings: SettingsDep,
) -> Effects:
    """Each tuned value's effect curve (the predicted score as it varies, every other value as
    in the recommendation) with its sd, and the runs' scores against it."""
    frame = await table.frame(db, schema)
    return await models.effects(frame, schema, settings.model_lower_bound)
