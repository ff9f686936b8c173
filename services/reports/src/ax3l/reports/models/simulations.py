"""A SnakeLab run: its row, configuration, best-game snapshot, episodes and Ax3l events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ax3l.reports.models.runs import RunReason, RunRow


class Run(BaseModel):
    """A row of SnakeLab's `simulation_runs` (its snapshot apart)."""

    model_config = ConfigDict(frozen=True)

    id: int
    run_id: str
    project_version: str
    config_hash: str
    status: str
    episode_count: int | None
    high_score: int | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    error_message: str | None


class Episode(BaseModel):
    model_config = ConfigDict(frozen=True)

    episode: int
    score: int
    steps: int
    epsilon: float | None
    loss: float | None


class RunEvent(BaseModel):
    """An Ax3l event of the run (its process id is the run id)."""

    model_config = ConfigDict(frozen=True)

    event_id: int
    occurred_at: datetime
    name: str
    category: str
    log_level: str
    label: str = Field("", description="the event's name for reading")
    summary: str = Field("", description="the event in one sentence, as the event log says it")


class Simulation(BaseModel):
    model_config = ConfigDict(frozen=True)

    run: Run
    config: dict[str, Any] | None
    flat_config: dict[str, Any] | None
    snapshot: Any
    episodes: list[Episode]
    events: list[RunEvent]
    row: RunRow | None = Field(
        None,
        description="its row of the runs table: proposer and seat, entry, its golden"
        " configuration of its time, the score difference, what differs from that golden and"
        " why it was chosen in one line",
    )
    reason: RunReason | None = Field(None, description="who chose it and why, in full")
