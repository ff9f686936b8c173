"""The orchestrator's REST API: ``/health``, ``/ready`` and ``/api/status``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from ax3l.orchestrator.status import LoopStatus
from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.reads import count_simulations
from ax3l.shared.snakelab_client import (
    SnakeLabClient,
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
)


@dataclass(frozen=True)
class ApiResources:
    """What the routes read: the live status and the two dependencies /ready checks."""

    status: LoopStatus
    db: Database
    snakelab: SnakeLabClient


def get_resources(request: Request) -> ApiResources:
    resources: ApiResources = request.app.state.resources
    return resources


ResourcesDep = Annotated[ApiResources, Depends(get_resources)]

router = APIRouter(tags=["status"])


@router.get("/health")
async def health() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/ready")
async def ready(resources: ResourcesDep) -> JSONResponse:
    """Both databases and SnakeLab answer (during an outage: since when it is waited for)."""
    problems = {}
    try:
        await resources.db.ping()
    except DatabaseError as exc:
        problems["database"] = resources.db.outage.describe() or str(exc)
    try:
        await resources.snakelab.health()
    except (SnakeLabUnavailable, SnakeLabProtocolError, SnakeLabError) as exc:
        problems["snakelab"] = str(exc)
    if resources.status.stop_reason:
        problems["loop"] = resources.status.stop_reason
    if problems:
        return JSONResponse({"status": "unavailable", "problems": problems}, status_code=503)
    return JSONResponse({"status": "ready"})


@router.get("/api/status")
async def status(resources: ResourcesDep) -> dict[str, Any]:
    """What the loop is doing: phase, entry, cycles, seed, golden run, SnakeLab runs, errors.

    ``database`` says whether the database answers; during an outage ``waiting`` reads
    "waiting for the database since <time>: <error>".
    """
    data = resources.status.as_dict()
    try:
        data["snakelab_runs"] = await count_simulations(resources.db)
    except DatabaseError as exc:
        data["snakelab_runs"] = None
        data["database_error"] = str(exc)
    outage = resources.db.outage
    data["database"] = outage.as_dict()
    if outage.active:
        data["waiting"] = outage.describe()
    return data


def create_app(resources: ApiResources) -> FastAPI:
    app = FastAPI(title="Ax3l orchestrator", version="0.1.0")
    app.state.resources = resources
    app.include_router(router)
    return app
