"""What the listener has done since it started."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ax3l.toolbroker.deps import ResourcesDep

router = APIRouter(prefix="/api/status", tags=["status"])


@router.get("")
async def status(resources: ResourcesDep) -> dict[str, Any]:
    """Requests handled, counts by outcome and the time of the last request."""
    return resources.status.snapshot()
