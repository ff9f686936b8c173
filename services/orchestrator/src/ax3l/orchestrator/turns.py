"""Turn selection: which round-robin entry is next, from the latest checkpoint.

A turn is the entry at the latest checkpoint's index, or the one after it once that turn
produced an accepted proposal or an exhaustion skip (``ax3l.shared.turn_state``, the rule the
toolbroker reads too). Nothing else moves the position, so golden and seed changes keep it, a
restart mid-conversation resumes the same entry, and an accepted proposal whose MCP reply was
lost still advances exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass

from ax3l.shared.db.event_log import EventLog
from ax3l.shared.db.event_store import EventSource, EventStore
from ax3l.shared.event_models import RoundRobinCheckpoint
from ax3l.shared.registry import ENTRIES, PARAMETER_ORDER, Entry
from ax3l.shared.turn_state import latest_turn_state


class ParameterOrderChanged(RuntimeError):
    """The stored checkpoint has another parameter order than this Ax3l's schema."""


@dataclass(frozen=True)
class Turn:
    """One step of the round robin."""

    index: int

    @property
    def entry(self) -> Entry:
        return ENTRIES[self.index]

    @property
    def parameter(self) -> str:
        return self.entry.name


async def next_turn(db: EventSource) -> Turn:
    """The turn to take now (a fresh experiment starts at hidden size)."""
    state = await latest_turn_state(db)
    if state is None:
        return Turn(0)
    problem = state.order_problem
    if problem:
        raise ParameterOrderChanged(problem)
    if state.answer is not None:
        return Turn((state.index + 1) % len(PARAMETER_ORDER))
    return Turn(state.index)


async def check_stored_order(db: EventSource) -> None:
    """Refuse to start on a history with another parameter order (before any other work)."""
    state = await latest_turn_state(db)
    if state is not None and state.order_problem:
        raise ParameterOrderChanged(state.order_problem)


async def write_checkpoint(log: EventLog | EventStore, turn: Turn, process_id: str) -> int:
    """Store the order and index before the turn asks anyone for a proposal."""
    return await log.log(
        RoundRobinCheckpoint(parameter_order=list(PARAMETER_ORDER), index=turn.index),
        parameter=turn.parameter,
        source_name="RoundRobin",
        process_id=process_id,
    )
