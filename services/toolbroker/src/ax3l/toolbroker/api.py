"""The toolbroker's FastAPI app: /health, /ready and /api/status."""

from __future__ import annotations

from fastapi import FastAPI

from ax3l.shared.metrics import add_metrics
from ax3l.shared.settings import DEFAULT_ALLOWED_HOSTS
from ax3l.shared.trusted_hosts import allow_only
from ax3l.toolbroker.deps import BrokerResources
from ax3l.toolbroker.routes import health, status


def create_app(resources: BrokerResources, allowed_hosts: str = DEFAULT_ALLOWED_HOSTS) -> FastAPI:
    """The API, answering only requests for ``allowed_hosts`` (AX3L_ALLOWED_HOSTS)."""
    app = FastAPI(
        title="Ax3l toolbroker",
        description="Validates, deduplicates and submits SnakeLab tool calls.",
    )
    app.state.resources = resources
    app.include_router(health.router)
    app.include_router(status.router)
    add_metrics(app, "toolbroker")
    allow_only(app, allowed_hosts)
    return app
