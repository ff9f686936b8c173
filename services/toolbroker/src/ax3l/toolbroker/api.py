"""The toolbroker's FastAPI app: /health, /ready and /api/status."""

from __future__ import annotations

from fastapi import FastAPI

from ax3l.toolbroker.deps import BrokerResources
from ax3l.toolbroker.routes import health, status


def create_app(resources: BrokerResources) -> FastAPI:
    app = FastAPI(
        title="Ax3l toolbroker",
        description="Validates, deduplicates and submits SnakeLab tool calls.",
    )
    app.state.resources = resources
    app.include_router(health.router)
    app.include_router(status.router)
    return app
