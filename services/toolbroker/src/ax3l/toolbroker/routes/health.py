"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ax3l.shared.readiness import (
    NOT_READY_RESPONSE,
    Readiness,
    database_problem,
    snakelab_problem,
)
from ax3l.toolbroker.deps import ResourcesDep

router = APIRouter(tags=["health"])


@router.get("/health")
async def health() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/ready", responses=NOT_READY_RESPONSE)
async def ready(resources: ResourcesDep, response: Response) -> Readiness:
    """Ready when both databases answer and SnakeLab answers ``health``; 503 otherwise."""
    readiness = Readiness.of(
        {
            "database": await database_problem(resources.db),
            "snakelab": await snakelab_problem(resources.snakelab),
        }
    )
    response.status_code = readiness.http_status
    return readiness
