"""Attempts at one configuration, read from SnakeLab's tables: how many ran, which trained.

A step's configuration can run more than once only when the loop runs it again itself: a
seeding or seed-rotation baseline that failed, or a run SnakeLab failed before its first
episode (an infrastructure failure, not a tested configuration). Every bound on those repeats
counts the runs SnakeLab stored, never a counter in memory, so a restart finds the earlier
attempts, including one submitted just before a crash and never recorded in Ax3l's events.

A run *never trained* when SnakeLab failed it (or lost it) before any episode: no episode count,
no high score. ``started_at`` is not part of the rule: a SnakeLab restart between a run's start
and its first episode stores a start time and still tested nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import select
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import SimulationSubmitted
from ax3l.shared.wire import TERMINAL_STATES

NEVER_TRAINED_STATES = frozenset({"failed", "vanished"})


def never_trained(state: str | None, high_score: Any, episode_count: Any) -> bool:
    """SnakeLab failed (or lost) the run before its first episode."""
    return state in NEVER_TRAINED_STATES and high_score is None and not episode_count


@dataclass(frozen=True)
class StoredRun:
    """One stored run of a configuration, as SnakeLab's ``simulation_runs`` has it."""

    sl_id: int
    run_id: str
    status: str
    high_score: int | None
    episode_count: int | None
    error: str | None

    @property
    def ended_unscored(self) -> bool:
        """Terminal without a usable high score (``completed`` without one included)."""
        return self.status in TERMINAL_STATES and not (
            self.status == "completed" and self.high_score is not None
        )

    @property
    def never_trained(self) -> bool:
        return never_trained(self.status, self.high_score, self.episode_count)


async def stored_runs(db: Database, index: ConfigIndex, config: dict[str, Any]) -> list[StoredRun]:
    """Every stored run of ``config`` (all 26 columns, seed included), oldest first."""
    indexed = await index.find_indexed(config)
    if not indexed:
        return []
    rows = await SnakeLabRuns(db).attempts([run.run_id for run in indexed])
    return [
        StoredRun(
            sl_id=int(row["id"]),
            run_id=str(row["run_id"]),
            status=str(row["status"]),
            high_score=None if row["high_score"] is None else int(row["high_score"]),
            episode_count=None if row["episode_count"] is None else int(row["episode_count"]),
            error=row["error_message"],
        )
        for row in rows
    ]


async def recorded_run_ids(db: Database, run_ids: list[str]) -> set[str]:
    """Those of ``run_ids`` that have their ``simulation_submitted`` event."""
    if not run_ids:
        return set()
    submitted = await select(db, SimulationSubmitted, process_ids=run_ids)
    return {str(event.process_id) for event in submitted}


async def unrecorded_runs(db: Database, runs: list[StoredRun]) -> list[StoredRun]:
    """Runs SnakeLab stored whose submission Ax3l never recorded (a crash right after submit)."""
    recorded = await recorded_run_ids(db, [run.run_id for run in runs])
    return [run for run in runs if run.run_id not in recorded]


def attempt_number(runs: list[StoredRun], run_id: str) -> int:
    """1 for a configuration's first stored run, 2 for its second, ..."""
    for position, run in enumerate(runs, start=1):
        if run.run_id == run_id:
            return position
    return len(runs) + 1
