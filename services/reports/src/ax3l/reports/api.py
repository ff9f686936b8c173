"""Every router of the report server, in one place."""

from __future__ import annotations

from fastapi import APIRouter

from ax3l.reports.routes import (
    api_reference,
    assets,
    comparison,
    dashboard,
    events,
    golden,
    health,
    highscores,
    model,
    plots,
    proposers,
    runs,
    scores,
    simulations,
    status,
)

api_router = APIRouter()
api_router.include_router(dashboard.pages)
for module in (
    events,
    highscores,
    golden,
    scores,
    simulations,
    proposers,
    comparison,
    runs,
    plots,
    model,
):
    api_router.include_router(module.router)
    api_router.include_router(module.pages)
api_router.include_router(status.router)
api_router.include_router(health.router)
api_router.include_router(assets.router)
api_router.include_router(api_reference.pages)
api_router.include_router(assets.icon_router)
