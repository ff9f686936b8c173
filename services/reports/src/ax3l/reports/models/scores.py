"""The score distribution: how many SnakeLab runs reached each high score."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ax3l.reports.models.parameters import QueryModel
from ax3l.shared.wire import RunState


class ScoreQuery(QueryModel):
    status: RunState | None = Field(
        "completed", description="only runs in this state; empty for every state"
    )
    seed: int | None = Field(None, ge=0, le=2**64 - 1, description="only runs with this seed")

    @field_validator("status", mode="before")
    @classmethod
    def _any_status(cls, value: Any) -> Any:
        return None if value in ("", "any") else value


class ScoreBin(BaseModel):
    model_config = ConfigDict(frozen=True)

    score: int
    runs: int


class ScoreDistribution(BaseModel):
    """Run high scores as one bin per score plus summary figures."""

    model_config = ConfigDict(frozen=True)

    bins: list[ScoreBin]
    runs: int
    mean: float | None
    median: float | None
    best: int | None
    worst: int | None
