"""Experiment cycles: complete round-robin passes and the stagnant ones, derived from events.

A step completes when its run has been compared (``configuration_compared``) or it was skipped
as exhausted (``parameter_space_exhausted``); the completion's own ``index``, when its content
carries one, or else the latest ``round_robin_checkpoint`` says which entry the step was. A
cycle is the entries ``0..n-1`` of the checkpoint's order completed in order, each step
counted once. A cycle is stagnant when it started (its first checkpoint) after
the latest ``golden_config_created``: a cycle that contains an improvement, or that a new
golden follows, does not count, and a new golden (seed baselines included) resets the count.

``CycleCounter`` is a pure fold over events in ``event_id`` order, so it can be fed
incrementally; ``CycleTracker`` feeds it from the database, reading only new events.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from ax3l.shared.db.event_reads import parse_message
from ax3l.shared.db.event_store import EventSource, events_of
from ax3l.shared.event_models import (
    ConfigurationCompared,
    GoldenConfigCreated,
    ParameterSpaceExhausted,
    RoundRobinCheckpoint,
    read_content,
)
from ax3l.shared.registry import PARAMETER_ORDER

CHECKPOINT = RoundRobinCheckpoint.event
COMPLETIONS = frozenset({ConfigurationCompared.event, ParameterSpaceExhausted.event})
GOLDEN = GoldenConfigCreated.event
CYCLE_EVENTS = (CHECKPOINT, *sorted(COMPLETIONS), GOLDEN)


@dataclass(frozen=True)
class Cycle:
    """One complete round-robin pass: its first checkpoint and its last completion."""

    started_at_event: int
    completed_at_event: int


@dataclass(frozen=True)
class CycleCount:
    """What the events say about cycles so far."""

    complete: int
    stagnant: int
    # Steps of the cycle in progress that are already complete (0 when none is under way).
    progress: int
    # The entry of the latest checkpoint (None before the first).
    index: int | None
    order: tuple[str, ...] | None


def _parsed(content: Any) -> Any:
    """A content given as its stored text or already parsed, parsed."""
    return parse_message(content) if isinstance(content, str) else content


def checkpoint_position(content: Any) -> tuple[tuple[str, ...], int] | None:
    """``(parameter_order, index)`` of a checkpoint's content (text or parsed), or None when it
    is unreadable."""
    checkpoint = RoundRobinCheckpoint.from_stored(_parsed(content))
    order, index = checkpoint.parameter_order, checkpoint.index
    if not order or index is None or not 0 <= index < len(order):
        return None
    return tuple(order), index


def _own_index(name: str, content: Any) -> int | None:
    """The index a completion's content (text or parsed) names, if a usable one."""
    index = read_content(name, _parsed(content)).get("index")
    return index if index is not None and index >= 0 else None


@dataclass
class CycleCounter:
    """The fold: feed events in ``event_id`` order, read ``count()`` at any time."""

    cycles: list[Cycle] = field(default_factory=list)
    last_event_id: int = 0
    _order: tuple[str, ...] | None = None
    _index: int | None = None
    _checkpoint_event: int | None = None
    _expected: int = 0
    _attempt_start: int | None = None
    _last_golden: int | None = None

    def feed(self, event_id: int, name: str, content: Any = None) -> None:
        """Account for one event; ``content`` (text or parsed) matters for steps only."""
        self.last_event_id = max(self.last_event_id, event_id)
        if name == CHECKPOINT:
            position = checkpoint_position(content)
            self._checkpoint_event = event_id
            if position is None:
                # An unreadable checkpoint: its step is known only if the completion says.
                self._index = None
                return
            order, index = position
            if order != self._order:
                # A different order starts a new experiment: no partial cycle carries over.
                self._order, self._expected, self._attempt_start = order, 0, None
            self._index = index
        elif name in COMPLETIONS:
            self._complete_step(event_id, _own_index(name, content))
        elif name == GOLDEN:
            self._last_golden = event_id

    def _complete_step(self, event_id: int, own_index: int | None) -> None:
        order = self._order
        if order is None and own_index is not None:
            order = PARAMETER_ORDER  # no readable checkpoint yet: the registry's order
        index = self._index
        if own_index is not None and order is not None and own_index < len(order):
            index = own_index
        if index is None or order is None:
            return
        started = self._checkpoint_event if self._checkpoint_event is not None else event_id
        if index == self._expected:
            if index == 0:
                self._attempt_start = started
            self._expected += 1
            if self._expected == len(order):
                assert self._attempt_start is not None
                self.cycles.append(Cycle(self._attempt_start, event_id))
                self._expected = 0
        elif self._expected > 0 and index == self._expected - 1:
            pass  # the same step completed again (a recovery repeat): each step counts once
        elif index == 0:
            self._attempt_start = started
            self._expected = 1
        else:
            # Out of order (a step that never completed): this pass can no longer be a cycle.
            self._expected = 0

    def count(self) -> CycleCount:
        # Cycles are appended in event order, so their starts are sorted.
        first_after = (
            0
            if self._last_golden is None
            else bisect_right(self.cycles, self._last_golden, key=lambda c: c.started_at_event)
        )
        stagnant = len(self.cycles) - first_after
        return CycleCount(
            complete=len(self.cycles),
            stagnant=stagnant,
            progress=self._expected,
            index=self._index,
            order=self._order,
        )


def count_cycles(events: Any) -> CycleCount:
    """Cycles of a whole history given as ``(event_id, name, content)`` in ``event_id`` order."""
    counter = CycleCounter()
    for event_id, name, content in events:
        counter.feed(event_id, name, content)
    return counter.count()


class CycleTracker:
    """A ``CycleCounter`` kept up to date from the database, reading only events it has not seen.

    Only the orchestrator writes the events that matter here, one at a time, so event ids of
    those events commit in order and reading ``event_id > last`` misses nothing. When the events
    were wiped (the last one seen is gone) it starts over.
    """

    BATCH = 20_000

    def __init__(self) -> None:
        self._counter = CycleCounter()
        self._lock = asyncio.Lock()

    async def refresh(self, db: EventSource) -> CycleCount:
        """Read new cycle events and return the current count."""
        store = events_of(db)
        async with self._lock:
            last = self._counter.last_event_id
            if last and not await store.has_event(last):
                self._counter = CycleCounter()
            while True:
                events = await store.select(
                    CYCLE_EVENTS, after=self._counter.last_event_id, oldest=self.BATCH
                )
                for event in events:
                    self._counter.feed(event.event_id, event.name, event.content)
                if len(events) < self.BATCH:
                    return self._counter.count()
