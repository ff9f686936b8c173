"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.snakelab_client import SnakeLabError, SnakeLabProtocolError, SnakeLabUnavailable
from ax3l.toolbroker.deps import ResourcesDep

router = APIRouter(tags=["health"])


@router.get("/health")
async def health() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/ready", response_model=None)
async def ready(resources: ResourcesDep) -> dict[str, Any] | JSONResponse:
    """Ready when both databases answer and SnakeLab answers ``health``; 503 otherwise."""
    checks: dict[str, str] = {}
    try:
        await resources.db.ping()
        checks["database"] = "ok"
    except DatabaseError as exc:
        checks["database"] = resources.db.outage.describe() or str(exc)
    try:
        await resources.snakelab.health()
        checks["snakelab"] = "ok"
    except (SnakeLabUnavailable, SnakeLabError, SnakeLabProtocolError) as exc:
        checks["snakelab"] = str(exc)
    except Exception as exc:  # a malformed health reply must not turn into a 500
        checks["snakelab"] = f"{type(exc).__name__}: unexpected health reply"
    body = {"ready": all(v == "ok" for v in checks.values()), "checks": checks}
    if not body["ready"]:
        return JSONResponse(body, status_code=503)
    return body
