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
    # The golden's kind (seeding, promotion, seed_rotation, adopted...); None in older rows.
    kind: str | None = None


class Highscores(BaseModel):
    """The series in acceptance order, and SnakeLab's current run count (where it ends)."""

    model_config = ConfigDict(frozen=True)

    points: list[HighscorePoint]
    current_simulations: int


class FreshSeed(BaseModel):
    """A seed rotation: the golden configuration re-run on a fresh seed, and what it had
    scored on the seed it was chosen on."""

    model_config = ConfigDict(frozen=True)

    seed: int | None
    score: int
    run_id: str | None
    simulations: int
    previous_seed: int | None
    previous_score: int
    fall: int  # how much lower it scored on the fresh seed (negative: higher)


class FreshSeeds(BaseModel):
    """How the golden configuration did on fresh seeds, against the untuned defaults' first
    run, and the experiment's conclusion in one sentence (``experiment_conclusion``)."""

    model_config = ConfigDict(frozen=True)

    rotations: list[FreshSeed]
    defaults_score: int | None  # the first golden's: the untuned defaults, unless adopted
    defaults_seed: int | None
    golden_score: int | None
    golden_seed: int | None
    mean_fresh: float | None
    mean_fall: float | None
    conclusion: str
