"""Golden configurations: each one's summary, its configuration, what changed and why."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ax3l.reports.models.events import RefreshQuery
from ax3l.reports.models.parameters import QueryModel


class GoldenQuery(QueryModel):
    before: int | None = Field(None, ge=1, le=2**63 - 1, description="older than this event_id")
    limit: int = Field(100, ge=1, le=500, description="configurations per page")


class GoldenPageQuery(GoldenQuery, RefreshQuery):
    """The golden configurations page adds its refresh selector."""


class ConfirmationRun(BaseModel):
    """One seed of a confirmed golden: its high score there and the run that scored it (None
    where the stored lists are shorter than the seeds)."""

    model_config = ConfigDict(frozen=True)

    seed: int | None
    score: int | None
    run_id: str | None


class Confirmation(BaseModel):
    """A golden created under ``AX3L_PROMOTION=confirm``: its mean high score over the current
    seed and the confirmation seeds, and its run on each (the current seed first)."""

    # Frozen with a tuple, so hashable: a high-score point carries it (figures cache hovers).
    model_config = ConfigDict(frozen=True)

    mean_high_score: float | None
    runs: tuple[ConfirmationRun, ...]


class GoldenSummary(BaseModel):
    """A golden_config_created event, read tolerantly (old contents may lack fields)."""

    model_config = ConfigDict(frozen=True)

    event_id: int
    occurred_at: datetime
    run_id: str | None
    high_score: int | None
    seed: int | None
    simulations: int | None
    reason: str | None


class Change(BaseModel):
    """One dotted path of the configuration whose value differs from the previous golden's."""

    model_config = ConfigDict(frozen=True)

    path: str
    before: Any
    after: Any


class GoldenEntry(GoldenSummary):
    proposer: str | None
    config: dict[str, Any] | None
    # Differences from the previous golden; None for the first one (nothing to compare with).
    changes: list[Change] | None
    # Its mean and runs over the confirmation seeds; None for a golden of the single mode.
    confirmation: Confirmation | None = None
    tags: list[str] = Field(default_factory=list, description="its run's tags (`ax3l-db tag`)")
    notes: list[str] = Field(
        default_factory=list, description="its run's notes, oldest first (`ax3l-db note`)"
    )


class GoldenPage(BaseModel):
    """Golden configurations newest first, and the cursor of the next (older) page."""

    model_config = ConfigDict(frozen=True)

    configurations: list[GoldenEntry]
    older_before: int | None
