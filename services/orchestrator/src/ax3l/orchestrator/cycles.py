"""Round-robin cycles and stagnation for the loop, counted by the shared cycle rules.

The rules live in ``ax3l.shared.cycles`` so the loop's seed rotation and the report pages can
never disagree on how many cycles, or stagnant cycles, there were. The loop counts them with a
``CycleTracker`` of its own, which reads each event once: reading the whole history every step
made a step's CPU grow with the history (the soak bench saw 78 ms per step at 500 steps and
236 ms at 1,500).
"""

from __future__ import annotations

from collections.abc import Iterable

from ax3l.orchestrator.event_reads import StoredEvent
from ax3l.shared.cycles import CycleCount
from ax3l.shared.cycles import count_cycles as count_event_cycles


def count_cycles(events: Iterable[StoredEvent]) -> CycleCount:
    """Fold stored events, in event order, into cycle counts."""
    return count_event_cycles((event.event_id, event.name, event.content) for event in events)
