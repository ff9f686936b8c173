"""Round-robin cycles and stagnation for the loop, counted by the shared cycle rules.

The rules live in ``ax3l.shared.cycles`` so the loop's seed rotation and the report pages can
never disagree on how many cycles, or stagnant cycles, there were.
"""

from __future__ import annotations

from collections.abc import Iterable

from ax3l.orchestrator.event_reads import StoredEvent, select
from ax3l.shared.cycles import CYCLE_EVENTS, CycleCount
from ax3l.shared.cycles import count_cycles as count_event_cycles
from ax3l.shared.db.database import Database


def count_cycles(events: Iterable[StoredEvent]) -> CycleCount:
    """Fold stored events, in event order, into cycle counts."""
    return count_event_cycles((event.event_id, event.name, event.content) for event in events)


async def read_cycles(db: Database) -> CycleCount:
    """The cycle counts of the whole stored history."""
    return count_cycles(await select(db, CYCLE_EVENTS))
