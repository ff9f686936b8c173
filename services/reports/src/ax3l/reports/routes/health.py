"""``/health`` (the process answers) and ``/ready`` (both databases answer)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ax3l.reports.deps import DatabaseDep
from ax3l.shared.db.errors import DatabaseError

router = APIRouter(tags=["health"])


@router.get("/health")
async def health() -> dict[str, str]:
    """Always ok while the process serves requests."""
    return {"status": "ok"}


@router.get("/ready", response_model=None)
async def ready(db: DatabaseDep) -> dict[str, str] | JSONResponse:
    """Ok when Ax3l's database and SnakeLab's tables can be read; 503 otherwise."""
    try:
        await db.ping()
    except DatabaseError as exc:
        detail = db.outage.describe() or str(exc)
        return JSONResponse({"status": "unavailable", "detail": detail}, status_code=503)
    return {"status": "ok"}
