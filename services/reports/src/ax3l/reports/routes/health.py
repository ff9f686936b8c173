"""``/health`` (the process answers) and ``/ready`` (both databases answer)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ax3l.reports.deps import DatabaseDep
from ax3l.shared.readiness import NOT_READY_RESPONSE, Readiness, database_problem

router = APIRouter(tags=["health"])


@router.get("/health")
async def health() -> dict[str, str]:
    """Always ok while the process serves requests."""
    return {"status": "ok"}


@router.get("/ready", responses=NOT_READY_RESPONSE)
async def ready(db: DatabaseDep, response: Response) -> Readiness:
    """Ready when Ax3l's database and SnakeLab's tables can be read; 503 otherwise."""
    readiness = Readiness.of({"database": await database_problem(db)})
    response.status_code = readiness.http_status
    return readiness
