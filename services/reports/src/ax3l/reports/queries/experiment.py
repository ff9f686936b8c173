"""The experiment's state for the status bar: golden, all-time high, run count, cycles."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ax3l.reports.models.golden import GoldenSummary
from ax3l.shared.cycles import CycleCount, CycleTracker
from ax3l.shared.db.database import Database
from ax3l.shared.db.reads import latest_golden_row, read_golden
from ax3l.shared.db.report_reads import best_highscore
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import GoldenConfigCreated


@dataclass(frozen=True)
class ExperimentState:
    golden: GoldenSummary | None
    all_time_high_score: int | None
    simulations: int
    cycles: CycleCount


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def golden_content(row: dict[str, Any]) -> GoldenConfigCreated:
    """The ``golden_config_created`` content of an event row joined with its message."""
    return read_golden(row.get("content"), strict=False)


def golden_from_row(row: dict[str, Any]) -> GoldenSummary:
    """A golden summary from an event row joined with its message and highscore row."""
    golden = golden_content(row)
    seed = _int(golden.seed)
    if seed is None:
        seed = _int(row.get("seed"))
    if seed is None:
        seed = _int((golden.config or {}).get("seed"))
    score = _int(row.get("score"))
    return GoldenSummary(
        event_id=int(row["event_id"]),
        occurred_at=row["occurred_at"],
        run_id=golden.run_id,
        high_score=score if score is not None else _int(golden.high_score),
        seed=seed,
        simulations=_int(row.get("simulations"))
        if row.get("simulations") is not None
        else _int(golden.simulations),
        reason=golden.reason,
    )


async def latest_golden(db: Database) -> GoldenSummary | None:
    """The current golden configuration's summary, or None before the first one."""
    row = await latest_golden_row(db)
    return None if row is None else golden_from_row(row)


async def experiment_state(db: Database, cycles: CycleTracker) -> ExperimentState:
    """Everything the status bar shows except SnakeLab's own state, read concurrently."""
    golden, best, simulations, count = await asyncio.gather(
        latest_golden(db), best_highscore(db), SnakeLabRuns(db).count(), cycles.refresh(db)
    )
    if best is None and golden is not None:
        best = golden.high_score
    return ExperimentState(golden, best, simulations, count)
