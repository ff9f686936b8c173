"""The runs table: every SnakeLab run with its tuned values, where it came from, and how to
filter, sort and page it."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ax3l.reports.models.events import RefreshQuery
from ax3l.reports.models.parameters import QueryModel
from ax3l.shared.registry import ENTRIES
from ax3l.shared.wire import TERMINAL_STATES

# The nine values the round robin tunes, as SnakeLab's columns, in round-robin order.
TUNED_COLUMNS: tuple[str, ...] = tuple(column for entry in ENTRIES for column in entry.columns)
RUN_STATES: tuple[str, ...] = (
    "queued",
    "running",
    "paused",
    "cancelling",
    *sorted(TERMINAL_STATES),
)
# Columns a table can be sorted by (``id`` is submission order: SnakeLab's run number).
SORT_COLUMNS: tuple[str, ...] = (
    "id",
    "created_at",
    "completed_at",
    "seed",
    "status",
    "high_score",
    *TUNED_COLUMNS,
    "proposer",
    "entry",
    "golden",
    "score_difference",
)
MAX_LIMIT = 1000


class RunsQuery(QueryModel):
    """Filters, sort order and keyset cursor of the runs table (page, API and downloads)."""

    status: str | None = Field(None, description="only runs in this state")
    seed: int | None = Field(None, ge=0, le=2**64 - 1, description="only runs with this seed")
    entry: str | None = Field(
        None,
        max_length=100,
        description="only runs of this round-robin entry (hidden_size, ... reward_pair) or of"
        " the loop's own purpose (seeding, seed_rotation, confirmation, retry)",
    )
    proposer: str | None = Field(
        None, max_length=100, description="only runs proposed by this proposer (llm, tpe, ...)"
    )
    golden: bool | None = Field(None, description="only runs that became (or never became) golden")
    tag: str | None = Field(None, max_length=40, description="only runs with this tag")
    score_min: int | None = Field(None, description="high score at least this")
    score_max: int | None = Field(None, description="high score at most this")
    model_hidden_size_min: float | None = Field(None, description="model.hidden_size at least")
    model_hidden_size_max: float | None = Field(None, description="model.hidden_size at most")
    training_sequence_length_min: float | None = Field(
        None, description="training.sequence_length at least"
    )
    training_sequence_length_max: float | None = Field(
        None, description="training.sequence_length at most"
    )
    training_batch_size_min: float | None = Field(None, description="training.batch_size at least")
    training_batch_size_max: float | None = Field(None, description="training.batch_size at most")
    training_learning_rate_min: float | None = Field(
        None, description="training.learning_rate at least"
    )
    training_learning_rate_max: float | None = Field(
        None, description="training.learning_rate at most"
    )
    training_gamma_min: float | None = Field(None, description="training.gamma at least")
    training_gamma_max: float | None = Field(None, description="training.gamma at most")
    epsilon_initial_min: float | None = Field(None, description="epsilon.initial at least")
    epsilon_initial_max: float | None = Field(None, description="epsilon.initial at most")
    epsilon_decay_min: float | None = Field(None, description="epsilon.decay at least")
    epsilon_decay_max: float | None = Field(None, description="epsilon.decay at most")
    game_rewards_closer_to_food_min: float | None = Field(
        None, description="game.rewards.closer_to_food at least"
    )
    game_rewards_closer_to_food_max: float | None = Field(
        None, description="game.rewards.closer_to_food at most"
    )
    game_rewards_further_from_food_min: float | None = Field(
        None, description="game.rewards.further_from_food at least"
    )
    game_rewards_further_from_food_max: float | None = Field(
        None, description="game.rewards.further_from_food at most"
    )
    sort: str = Field("id", description="the column to sort by: " + ", ".join(SORT_COLUMNS))
    order: Literal["asc", "desc"] = Field("desc", description="sort direction")

    @field_validator("status")
    @classmethod
    def _known_status(cls, value: str | None) -> str | None:
        if value is not None and value not in RUN_STATES:
            raise ValueError(f"unknown status {value!r}; known: {', '.join(RUN_STATES)}")
        return value

    @field_validator("sort", mode="before")
    @classmethod
    def _known_sort(cls, value: object) -> object:
        if value is None:
            return "id"
        if value not in SORT_COLUMNS:
            raise ValueError(f"cannot sort by {value!r}; columns: {', '.join(SORT_COLUMNS)}")
        return value

    @field_validator("order", mode="before")
    @classmethod
    def _default_order(cls, value: object) -> object:
        return "desc" if value is None else value

    @model_validator(mode="after")
    def _ranges_in_order(self) -> RunsQuery:
        for name, low, high in self.ranges():
            if low is not None and high is not None and low > high:
                raise ValueError(f"{name}: the minimum {low:g} is above the maximum {high:g}")
        return self

    def ranges(self) -> list[tuple[str, float | None, float | None]]:
        """``(column, minimum, maximum)`` of the high score and each tuned value."""
        found: list[tuple[str, float | None, float | None]] = [
            ("high_score", self.score_min, self.score_max)
        ]
        for column in TUNED_COLUMNS:
            found.append((column, getattr(self, f"{column}_min"), getattr(self, f"{column}_max")))
        return found

    def filters(self) -> dict[str, str]:
        """The filters set, as query-string values (links keep them)."""
        values = self.model_dump(
            exclude={"sort", "order", "after", "before", "limit", "refresh"}, exclude_none=True
        )
        return {
            key: ("true" if item else "false")
            if isinstance(item, bool)
            else f"{item:g}"
            if isinstance(item, float)
            else str(item)
            for key, item in values.items()
        }


class RunsPageQuery(RunsQuery):
    """A page of the runs table: the filters plus the cursor and page size."""

    after: str | None = Field(
        None, max_length=400, description="the `next_after` cursor of the previous page"
    )
    before: str | None = Field(
        None, max_length=400, description="the `previous_before` cursor of the next page"
    )
    limit: int = Field(100, ge=1, le=MAX_LIMIT, description="runs per page")

    @field_validator("limit", mode="before")
    @classmethod
    def _default_limit(cls, value: object) -> object:
        return 100 if value is None else value

    @model_validator(mode="after")
    def _one_cursor(self) -> RunsPageQuery:
        if self.after is not None and self.before is not None:
            raise ValueError("give either after or before, not both")
        return self


class RunsViewQuery(RunsPageQuery, RefreshQuery):
    """The runs page: a page of the table plus its refresh selector."""


class RunRow(BaseModel):
    """One SnakeLab run: SnakeLab's columns, its nine tuned values, and from Ax3l's events the
    proposer and entry that produced it and whether it became a golden configuration."""

    model_config = ConfigDict(frozen=True)

    id: int = Field(description="SnakeLab's run number (submission order)")
    run_id: str
    created_at: datetime | None = Field(description="submitted (UTC)")
    completed_at: datetime | None
    seed: int | None
    status: str
    high_score: int | None
    model_hidden_size: int | float | None
    training_sequence_length: int | float | None
    training_batch_size: int | float | None
    training_learning_rate: int | float | None
    training_gamma: int | float | None
    epsilon_initial: int | float | None
    epsilon_decay: int | float | None
    game_rewards_closer_to_food: int | float | None
    game_rewards_further_from_food: int | float | None
    proposer: str | None = Field(description="who proposed it (null: the loop's own run)")
    entry: str | None = Field(
        description="the round-robin entry of its proposal, else the loop's purpose"
    )
    golden: bool = Field(description="it became a golden configuration")
    golden_run_id: str | None = Field(
        None,
        description="its golden configuration of its time: the one a proposal was built from,"
        " the one the loop's run re-ran (a seed rotation) or confirmed against",
    )
    golden_high_score: int | None = Field(None, description="that golden's high score")
    score_difference: int | None = Field(
        None, description="high score minus that golden's (a seed rotation's: the golden's fall)"
    )
    changes: str | None = Field(
        None,
        description="what differs from that golden: `path: golden -> this run`, `; ` between"
        " (the value tried; the seed for a seed rotation)",
    )
    changed: list[str] = Field(
        default_factory=list, description="the columns that differ from that golden"
    )
    tags: list[str] = Field(
        default_factory=list, description="its tags (`ax3l-db tag`; CSV: joined by `,`)"
    )
    notes: list[str] = Field(
        default_factory=list,
        description="its notes, oldest first (`ax3l-db note`; CSV: joined by a blank line)",
    )
    seat: str | None = Field(
        None, description="the seat whose submission it was (proposer `external`)"
    )
    reason: str | None = Field(
        None,
        description="why it was chosen, in one line: the model's reasoning, the `model`"
        " proposer's prediction, a fallback's cause (pages and `/api/runs`; not in downloads)",
    )


# The columns of the CSV and Parquet downloads: a row's facts, without what a page works out.
EXPORT_COLUMNS: tuple[str, ...] = tuple(
    name for name in RunRow.model_fields if name not in ("changed", "seat", "reason")
)


class RunReason(BaseModel):
    """Who chose a run and why, from its conversation's events."""

    model_config = ConfigDict(frozen=True)

    conversation_id: str | None = Field(description="the conversation that proposed it")
    proposer: str | None = Field(description="the proposer its conversation names")
    seat: str | None = Field(description="the seat whose submission it was")
    fallback: str | None = Field(description="why a fallback proposer took the turn")
    reasoning: str | None = Field(description="the model's reasoning (`reasoning_content`)")
    message: str | None = Field(description="the model's reply text, when it wrote one")
    reply_event_id: int | None = Field(description="the reply with the accepted tool call")
    model: dict[str, Any] | None = Field(
        description="the `model` proposer's figures (its `conversation_ended` event's `model`):"
        " predicted_mean, predicted_sd, expected_improvement, incumbent_mean, choices, runs; or"
        " `random` with why it chose at random"
    )
    summary: str | None = Field(description="all of it in one line")


class RunsPage(BaseModel):
    """One page of runs in the asked order, the cursors of the neighbouring pages (null at
    the ends) and how many runs the filters match."""

    model_config = ConfigDict(frozen=True)

    runs: list[RunRow]
    matching: int = Field(description="runs matching the filters")
    total: int = Field(description="runs SnakeLab holds")
    next_after: str | None = Field(description="pass as `after` for the next page")
    previous_before: str | None = Field(description="pass as `before` for the previous page")


MAX_COMPARED = 8


class RunsCompareQuery(RefreshQuery):
    """Runs chosen on ``/runs`` to compare side by side."""

    run: list[str] = Field(
        default_factory=list,
        validate_default=True,
        description=f"a run id to compare (repeat it: 1 to {MAX_COMPARED} runs, in this order)",
    )

    @field_validator("run", mode="before")
    @classmethod
    def _listed(cls, value: object) -> object:
        if value is None or value == "":
            return []
        return [value] if isinstance(value, str) else value

    @field_validator("run")
    @classmethod
    def _some_runs(cls, value: list[str]) -> list[str]:
        chosen = list(dict.fromkeys(v for v in value if v))
        if not chosen:
            raise ValueError(f"choose 1 to {MAX_COMPARED} runs to compare (run=<run id>)")
        if len(chosen) > MAX_COMPARED:
            raise ValueError(f"{len(chosen)} runs chosen: compare at most {MAX_COMPARED}")
        if any(len(v) > 36 for v in chosen):
            raise ValueError("a run id is at most 36 characters")
        return chosen


class ComparedCurve(BaseModel):
    """A compared run's learning curve: its 50-episode moving average per episode."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    episodes: list[int]
    average: list[float]


class RunsComparison(BaseModel):
    """Runs side by side: their rows, the columns in which they differ, their curves."""

    model_config = ConfigDict(frozen=True)

    runs: list[RunRow] = Field(description="the runs, in the order asked")
    differing: list[str] = Field(
        description="the columns (seed, the nine tuned values) whose values differ among them"
    )
    curves: list[ComparedCurve] = Field(description="each run's learning curve that has one")
