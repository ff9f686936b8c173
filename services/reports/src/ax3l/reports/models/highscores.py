"""The experiment's high-score series: accepted golden scores against SnakeLab's run count."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from ax3l.reports.models.golden import Confirmation


class HighscorePoint(BaseModel):
    """One accepted golden score at SnakeLab's run count when it was accepted."""

    # Frozen, so hashable: the figure caches each point's hover text.
    model_config = ConfigDict(frozen=True)

    event_id: int
    occurred_at: datetime
    simulations: int
    score: int
    seed: int | None
    run_id: str | None
    reason: str | None
    # A confirmed golden's mean and runs; None for a golden of the single mode.
    confirmation: Confirmation | None = None


class Highscores(BaseModel):
    """The series in acceptance order, and SnakeLab's current run count (where it ends)."""

    model_config = ConfigDict(frozen=True)

    points: list[HighscorePoint]
    current_simulations: int
