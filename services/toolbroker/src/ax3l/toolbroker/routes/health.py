"""Liveness and readiness."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import Request

from ax3l.shared.readiness import database_problem, readiness_router, snakelab_problem
from ax3l.toolbroker.deps import get_resources


async def checks(request: Request) -> Mapping[str, str | None]:
    """Ready when both databases answer and SnakeLab answers ``health``; 503 otherwise."""
    resources = get_resources(request)
    return {
        "database": await database_problem(resources.db),
        "snakelab": await snakelab_problem(resources.snakelab),
    }


router = readiness_router(checks, tags=["health"])
