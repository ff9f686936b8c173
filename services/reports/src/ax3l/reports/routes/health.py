"""``/health`` (the process answers) and ``/ready`` (both databases answer)."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import Request

from ax3l.shared.readiness import app_resources, database_problem, readiness_router


async def checks(request: Request) -> Mapping[str, str | None]:
    """Ready when Ax3l's database and SnakeLab's tables can be read; 503 otherwise."""
    return {"database": await database_problem(app_resources(request).db)}


router = readiness_router(
    checks, tags=["health"], health_doc="Always ok while the process serves requests."
)
