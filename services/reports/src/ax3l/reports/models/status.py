"""The status bar: SnakeLab's latest poll, the orchestrator's, and the experiment's state."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from ax3l.reports.models.golden import GoldenSummary


class SnakeLabOut(BaseModel):
    state: str
    label: str
    checked_at: datetime | None
    detail: str | None
    run_id: str | None
    run_state: str | None
    completed_epochs: int | None
    epochs: int | None
    high_score: int | None


class ConfirmationOut(BaseModel):
    """A confirmation in progress: the candidate and the golden on the shared seeds."""

    candidate_run_id: str
    golden_run_id: str | None
    seeds: list[int]


class OrchestratorOut(BaseModel):
    """The loop as the orchestrator's status API last described it (absent fields: None)."""

    state: str = Field(description="up, unavailable or unknown (no poll yet)")
    label: str
    checked_at: datetime | None
    unavailable_since: datetime | None = Field(description="first failed poll of this outage")
    detail: str | None = Field(description="why the last poll failed")
    phase: str | None
    parameter: str | None = Field(description="the round-robin entry of the current turn")
    index: int | None
    proposer: str | None
    conversation_id: str | None
    run_id: str | None
    failure_streak: int | None = Field(description="the model's failed conversations in a row")
    fallback_proposer: str | None
    llm_fallback_after: int | None = Field(description="failed conversations before fallback")
    last_error: str | None
    last_error_at: datetime | None
    last_error_seconds_ago: float | None
    backoff_until: datetime | None
    stop_reason: str | None
    promotion: str | None = Field(None, description="AX3L_PROMOTION: single or confirm")
    confirmation: ConfirmationOut | None = Field(
        None, description="under confirm, the confirmation in progress"
    )
    snakelab_hosts: dict[str, str] | None = Field(
        None,
        description="with several SnakeLab hosts: each endpoint's state (idle, running, down,"
        " unknown) as the loop last saw it",
    )
    disk_full: str | None = Field(
        None,
        description="the database server's disk is full: 'disk full since <time>: <error>'"
        " (the loop retries its write with backoff); None otherwise",
    )


class StatusOut(BaseModel):
    snakelab: SnakeLabOut
    orchestrator: OrchestratorOut
    golden: GoldenSummary | None
    golden_high_score: int | None
    all_time_high_score: int | None
    simulations_submitted: int
    experiment_cycles: int
    stagnant_cycles: int
    cycle_progress: int = Field(description="steps of the current cycle already completed")
    current_parameter: str | None
    turn: str | None = Field(
        None,
        description="the entry every card of a page names: the orchestrator's when it answers"
        " and names one (its phase and entry come from one poll), else the last checkpoint's"
        " (`current_parameter`)",
    )
    current_seed: int | None
    refreshed_at: datetime
