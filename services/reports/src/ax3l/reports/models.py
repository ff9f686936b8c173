"""Query parameters (validated: a bad value is a 422 with a message) and API reply shapes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ax3l.shared.events import CATALOG, Category
from ax3l.shared.wire import RunState

REFRESH_CHOICES: dict[int, str] = {0: "off", 5: "5 s", 30: "30 s", 60: "1 min", 300: "5 min"}


class QueryModel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # HTML forms send "All" choices as empty strings.
        return None if value == "" else value


class EventQuery(QueryModel):
    """Filters and cursor of the event log (page and API alike)."""

    category: Category | None = Field(None, description="only events of this category")
    event: str | None = Field(
        None,
        description="only events of this name (implies its category)",
        json_schema_extra={"enum": list(CATALOG)},
    )
    parameter: str | None = Field(
        None, max_length=100, description="only events for this parameter (prompts record it)"
    )
    process: str | None = Field(
        None, max_length=36, description="only events of this process (conversation or run id)"
    )
    before: int | None = Field(None, ge=1, le=2**63 - 1, description="older than this event_id")
    after: int | None = Field(None, ge=1, le=2**63 - 1, description="newer than this event_id")
    limit: int | None = Field(None, ge=1, le=500, description="events per page")

    @field_validator("event")
    @classmethod
    def _known_event(cls, value: str | None) -> str | None:
        if value is not None and value not in CATALOG:
            raise ValueError(f"unknown event {value!r}; known events: {', '.join(CATALOG)}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> EventQuery:
        if self.event is not None and self.category is not None:
            category = CATALOG[self.event][0]
            if category != self.category:
                raise ValueError(
                    f"event {self.event} belongs to category {category}, not {self.category}"
                )
        if self.before is not None and self.after is not None:
            raise ValueError("give either before or after, not both")
        return self


class EventPageQuery(EventQuery):
    """The event log page adds its refresh selector."""

    refresh: int = Field(0, description="seconds between automatic reloads: 0, 5, 30, 60 or 300")

    @field_validator("refresh", mode="before")
    @classmethod
    def _refresh_choice(cls, value: Any) -> Any:
        if value is None:
            return 0
        try:
            seconds = int(value)
        except (TypeError, ValueError):
            seconds = -1
        if seconds not in REFRESH_CHOICES:
            raise ValueError(
                f"refresh must be one of {', '.join(map(str, REFRESH_CHOICES))} (seconds)"
            )
        return seconds


class GoldenQuery(QueryModel):
    before: int | None = Field(None, ge=1, le=2**63 - 1, description="older than this event_id")
    limit: int = Field(100, ge=1, le=500, description="configurations per page")


class ScoreQuery(QueryModel):
    status: RunState | None = Field(
        "completed", description="only runs in this state; empty for every state"
    )
    seed: int | None = Field(None, ge=0, le=2**64 - 1, description="only runs with this seed")

    @field_validator("status", mode="before")
    @classmethod
    def _any_status(cls, value: Any) -> Any:
        return None if value in ("", "any") else value


# -- replies -----------------------------------------------------------------------------------


class EventOut(BaseModel):
    event_id: int
    occurred_at: datetime
    name: str
    label: str
    category: str
    log_level: str
    process_id: str | None
    parent_event_id: int | None
    source_name: str | None
    parameter: str | None
    ax3l_version: str | None
    summary: str = Field(description="the event in one sentence (else its content, cut)")
    content: str | None = Field(description="the content, cut for long non-reply events")
    truncated: bool


class EventPageOut(BaseModel):
    events: list[EventOut]
    newer_after: int | None = Field(description="pass as `after` for the newer page")
    older_before: int | None = Field(description="pass as `before` for the older page")


class ToolCallOut(BaseModel):
    name: str
    arguments: Any


class ReplyOut(BaseModel):
    tool_calls: list[ToolCallOut]
    reasoning: str | None
    message: str | None
    finish_reason: str | None
    model: str | None
    usage: dict[str, Any]
    timings: dict[str, Any]


class EventDetailOut(BaseModel):
    event: EventOut
    content: Any = Field(description="the whole content: JSON when it is JSON, else text")
    reply: ReplyOut | None
    parent: EventOut | None
    children: list[EventOut]


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


class GoldenOut(BaseModel):
    event_id: int
    occurred_at: datetime
    run_id: str | None
    high_score: int | None
    seed: int | None
    simulations: int | None
    reason: str | None


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


class StatusOut(BaseModel):
    snakelab: SnakeLabOut
    orchestrator: OrchestratorOut
    golden: GoldenOut | None
    golden_high_score: int | None
    all_time_high_score: int | None
    simulations_submitted: int
    experiment_cycles: int
    stagnant_cycles: int
    cycle_progress: int = Field(description="steps of the current cycle already completed")
    current_parameter: str | None
    current_seed: int | None
    refreshed_at: datetime
