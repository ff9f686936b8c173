"""``/api/status``: the status bar as JSON."""

from __future__ import annotations

from fastapi import APIRouter

from ax3l.reports.deps import CyclesDep, DatabaseDep, MonitorDep, OrchestratorDep, SettingsDep
from ax3l.reports.models.status import StatusOut
from ax3l.reports.status_report import build_status

router = APIRouter(prefix="/api/status", tags=["status"])


@router.get("", response_model=StatusOut)
async def get_status(
    db: DatabaseDep,
    monitor: MonitorDep,
    orchestrator: OrchestratorDep,
    cycles: CyclesDep,
    settings: SettingsDep,
) -> StatusOut:
    """SnakeLab's state (idle, running, unavailable; from the latest poll of its control
    socket), the golden and all-time high scores, simulations submitted (SnakeLab's run
    count), complete and stagnant experiment cycles, the current seed, and what the loop is
    doing (`orchestrator`: phase, entry, the model's failure streak, the fallback proposer, the
    last error; from the latest poll of the orchestrator's status API)."""
    return await build_status(db, monitor, cycles, settings.status_timeout, orchestrator)
