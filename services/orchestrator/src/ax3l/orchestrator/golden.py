"""Writing a new golden configuration: its event and its score snapshot in one transaction."""

from __future__ import annotations

from typing import Any

from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import GoldenConfigCreated


async def create_golden(
    db: Database,
    log: EventLog,
    *,
    run_id: str,
    config: dict[str, Any],
    high_score: int,
    seed: int,
    reason: str,
    kind: str,
    parent_event_id: int | None,
    parameter: str | None = None,
    extra: dict[str, Any] | None = None,
) -> int:
    """Log ``golden_config_created`` with its ``experiment_highscores`` row, atomically.

    ``simulations`` is SnakeLab's run count read inside the same transaction, so the plotted
    point matches the moment of acceptance.
    """
    async with db.transaction("creating a golden configuration") as cur:
        simulations = await SnakeLabRuns(db).count(cur)
        content = GoldenConfigCreated(
            run_id=run_id,
            config=config,
            high_score=high_score,
            seed=seed,
            simulations=simulations,
            reason=reason,
            kind=kind,
            **(extra or {}),
        )
        return await log.write(
            cur,
            content,
            process_id=run_id,
            parent_event_id=parent_event_id,
            parameter=parameter,
            highscore=HighscoreRow(simulations=simulations, score=high_score, seed=seed),
        )
