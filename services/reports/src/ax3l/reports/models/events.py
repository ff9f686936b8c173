"""The event log: its filters and cursor, and the events, pages and details it shows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ax3l.reports.models.parameters import QueryModel
from ax3l.reports.settings import LIVE_REFRESH_CHOICES
from ax3l.shared.events import CATALOG, Category

REFRESH_CHOICES: dict[int, str] = {0: "off", 5: "5 s", 30: "30 s", 60: "1 min", 300: "5 min"}
assert tuple(REFRESH_CHOICES) == LIVE_REFRESH_CHOICES


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


class RefreshQuery(QueryModel):
    """A page's refresh selector: how often the page updates its data in place."""

    refresh: int | None = Field(
        None,
        description="seconds between in-place updates of the page: 0 (off), 5, 30, 60 or 300;"
        " unset: AX3L_REPORTS_LIVE_REFRESH while the experiment runs (its orchestrator answers"
        " and has not stopped), else off",
    )

    @field_validator("refresh", mode="before")
    @classmethod
    def _refresh_choice(cls, value: Any) -> Any:
        if value is None or value == "":  # not chosen: the live default
            return None
        try:
            seconds = int(value)
        except (TypeError, ValueError):
            seconds = -1
        if seconds not in REFRESH_CHOICES:
            raise ValueError(
                f"refresh must be one of {', '.join(map(str, REFRESH_CHOICES))} (seconds)"
            )
        return seconds


class EventPageQuery(EventQuery, RefreshQuery):
    """The event log page adds its refresh selector."""


class Event(BaseModel):
    """An event's columns with its display label and one-sentence summary."""

    model_config = ConfigDict(frozen=True)

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


class EventPage(BaseModel):
    """Events newest first, with the cursors of the neighbouring pages (null at the ends)."""

    model_config = ConfigDict(frozen=True)

    events: list[Event]
    newer_after: int | None = Field(description="pass as `after` for the newer page")
    older_before: int | None = Field(description="pass as `before` for the older page")


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    arguments: Any = Field(description="parsed JSON when the model sent valid JSON, else text")


class Reply(BaseModel):
    """The parts of a llama-server chat completion that the report shows."""

    model_config = ConfigDict(frozen=True)

    tool_calls: list[ToolCall]
    reasoning: str | None
    message: str | None
    finish_reason: str | None
    model: str | None
    usage: dict[str, Any]
    timings: dict[str, Any]


class EventDetail(BaseModel):
    """One event with its whole content, its reply's parts, its parent and its children."""

    model_config = ConfigDict(frozen=True)

    event: Event
    content: Any = Field(description="the whole content: JSON when it is JSON, else text")
    reply: Reply | None
    parent: Event | None
    children: list[Event]
