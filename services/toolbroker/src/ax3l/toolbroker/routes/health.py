"""Liveness and readiness."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import Request

from ax3l.shared.readiness import app_resources, dependency_problems, readiness_router


async def checks(request: Request) -> Mapping[str, str | None]:
    """Ready when both databases answer and SnakeLab answers ``health``; 503 otherwise."""
    return await dependency_problems(app_resources(request))


router = readiness_router(checks, tags=["health"])
