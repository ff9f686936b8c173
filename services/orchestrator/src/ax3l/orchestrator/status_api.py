"""The orchestrator's REST API: ``/health``, ``/ready`` and ``/api/status``."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Annotated, Any, TypeAlias

from fastapi import APIRouter, Depends, FastAPI, Request

from ax3l.orchestrator.status import LoopStatus
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.metrics import GOLDEN_HIGH_SCORE, SEED, RunsByStatus, add_metrics
from ax3l.shared.readiness import (
    ServiceResources,
    app_resources,
    dependency_problems,
    readiness_router,
)
from ax3l.shared.settings import DEFAULT_ALLOWED_HOSTS
from ax3l.shared.trusted_hosts import allow_only

# What the routes read: the live status and the two dependencies /ready checks.
ApiResources: TypeAlias = ServiceResources[LoopStatus]
ResourcesDep = Annotated[ApiResources, Depends(app_resources)]


async def checks(request: Request) -> Mapping[str, str | None]:
    """Both databases and SnakeLab answer and the loop has not stopped; 503 otherwise (during
    an outage the problem says since when the database is waited for)."""
    resources: ApiResources = app_resources(request)
    return {
        **await dependency_problems(resources),
        "loop": resources.status.stop_reason or None,
    }


router = APIRouter(tags=["status"])


@router.get("/api/status")
async def status(resources: ResourcesDep) -> dict[str, Any]:
    """What the loop is doing: phase, entry, cycles, seed, golden run, SnakeLab runs, errors.

    ``database`` says whether the database answers; during an outage ``waiting`` reads
    "waiting for the database since <time>: <error>".
    """
    data = resources.status.as_dict()
    try:
        data["snakelab_runs"] = await SnakeLabRuns(resources.db).count()
    except DatabaseError as exc:
        data["snakelab_runs"] = None
        data["database_error"] = str(exc)
    outage = resources.db.outage
    data["database"] = outage.as_dict()
    if outage.active:
        data["waiting"] = outage.describe()
    return data


async def loop_gauges(request: Request) -> None:
    """The golden's high score, the seed and SnakeLab's runs by status, at each scrape."""
    resources: ApiResources = app_resources(request)
    runs: RunsByStatus = request.app.state.runs_by_status
    for gauge, value in (
        (GOLDEN_HIGH_SCORE, resources.status.golden_high_score),
        (SEED, resources.status.seed),
    ):
        gauge.set(float("nan") if value is None else value)
    # A database error leaves the last counts; ax3l_database_up says it is down.
    with contextlib.suppress(DatabaseError):
        await runs.refresh(resources.db)


def create_app(resources: ApiResources, allowed_hosts: str = DEFAULT_ALLOWED_HOSTS) -> FastAPI:
    """The API, answering only requests for ``allowed_hosts`` (AX3L_ALLOWED_HOSTS)."""
    app = FastAPI(title="Ax3l orchestrator", version="0.1.0")
    app.state.resources = resources
    app.include_router(readiness_router(checks, tags=["status"]))
    app.include_router(router)
    app.state.runs_by_status = RunsByStatus()
    add_metrics(app, "orchestrator", loop_gauges)
    allow_only(app, allowed_hosts)
    return app
