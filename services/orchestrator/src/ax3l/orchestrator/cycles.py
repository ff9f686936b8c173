"""Round-robin cycles and stagnation, counted from the loop's step completions.

A step completes when its run was compared (``configuration_compared``) or it was skipped as
exhausted (``parameter_space_exhausted``); both carry the step's ``index``. A cycle is indices
0..6 completed in order, each step once. A cycle is stagnant when it began after the latest
``golden_config_created``, so a cycle containing an improvement never counts and every new
golden (seed baselines included) resets the count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ax3l.orchestrator.event_reads import StoredEvent, select
from ax3l.shared.db.database import Database
from ax3l.shared.registry import PARAMETER_ORDER

COMPLETIONS = ("configuration_compared", "parameter_space_exhausted")
GOLDEN = "golden_config_created"


@dataclass(frozen=True)
class CycleCount:
    complete: int
    stagnant: int
    # Steps of the cycle under way that are complete already.
    progress: int


def count_cycles(events: Iterable[StoredEvent], size: int = len(PARAMETER_ORDER)) -> CycleCount:
    """Fold completions and golden creations, in event order, into cycle counts."""
    starts: list[int] = []
    expected = 0
    start: int | None = None
    last_golden: int | None = None
    for event in events:
        if event.name == GOLDEN:
            last_golden = event.event_id
            continue
        index = event.field("index")
        if type(index) is not int:
            continue  # seeding and rotation are not steps
        if index == expected:
            if index == 0:
                start = event.event_id
            expected += 1
            if expected == size:
                assert start is not None
                starts.append(start)
                expected = 0
        elif index == (expected - 1) % size:
            pass  # the same step reported twice counts once
        elif index == 0:
            start, expected = event.event_id, 1
        else:
            start, expected = None, 0  # a gap: this pass cannot complete a cycle
    stagnant = sum(1 for s in starts if last_golden is None or s > last_golden)
    return CycleCount(complete=len(starts), stagnant=stagnant, progress=expected)


async def read_cycles(db: Database) -> CycleCount:
    """The cycle counts of the whole stored history."""
    return count_cycles(await select(db, (*COMPLETIONS, GOLDEN)))
