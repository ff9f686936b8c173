"""The status bar's content: SnakeLab's latest poll plus the experiment's state."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from ax3l.reports.models import GoldenOut, SnakeLabOut, StatusOut
from ax3l.reports.queries.experiment import experiment_state
from ax3l.reports.snakelab_status import SnakeLabMonitor
from ax3l.shared.cycles import CycleTracker
from ax3l.shared.db.database import Database


async def build_status(
    db: Database, monitor: SnakeLabMonitor, cycles: CycleTracker, wait: float
) -> StatusOut:
    """Everything the status bar shows; SnakeLab's part never waits longer than ``wait``."""
    snakelab, state = await asyncio.gather(monitor.current(wait), experiment_state(db, cycles))
    run = snakelab.run
    golden = state.golden
    count = state.cycles
    current_parameter = None
    if count.order is not None and count.index is not None:
        current_parameter = count.order[count.index]
    return StatusOut(
        snakelab=SnakeLabOut(
            state=snakelab.state,
            label=snakelab.label,
            checked_at=snakelab.checked_at,
            detail=snakelab.detail,
            run_id=run.run_id if run else None,
            run_state=run.state if run else None,
            completed_epochs=run.completed_epochs if run else None,
            epochs=run.epochs if run else None,
            high_score=run.high_score if run else None,
        ),
        golden=None if golden is None else GoldenOut.model_validate(golden, from_attributes=True),
        golden_high_score=golden.high_score if golden else None,
        all_time_high_score=state.all_time_high_score,
        simulations_submitted=state.simulations,
        experiment_cycles=count.complete,
        stagnant_cycles=count.stagnant,
        cycle_progress=count.progress,
        current_parameter=current_parameter,
        current_seed=golden.seed if golden else None,
        refreshed_at=datetime.now(UTC).replace(tzinfo=None),
    )
