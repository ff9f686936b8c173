"""``/health`` (the process answers) and ``/ready`` (both databases answer, and the
orchestrator did not report the database's disk full)."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import Request

from ax3l.reports.orchestrator_status import OrchestratorMonitor
from ax3l.reports.resources import Resources
from ax3l.shared.readiness import app_resources, database_problem, readiness_router


async def checks(request: Request) -> Mapping[str, str | None]:
    """Ready when Ax3l's database and SnakeLab's tables can be read and the orchestrator's
    latest status does not say the database's disk is full ("disk: disk full since ...");
    503 otherwise."""
    resources: Resources = app_resources(request)
    return {
        "database": await database_problem(resources.db),
        "disk": _disk_full(resources.orchestrator),
    }


def _disk_full(orchestrator: OrchestratorMonitor | None) -> str | None:
    """What the orchestrator's latest status says of a full disk (this server only reads, so
    it learns of one from the writer), else None."""
    if orchestrator is None or orchestrator.latest.state != "up":
        return None
    value = orchestrator.latest.data.get("disk_full")
    return value if isinstance(value, str) and value else None


router = readiness_router(
    checks, tags=["health"], health_doc="Always ok while the process serves requests."
)
