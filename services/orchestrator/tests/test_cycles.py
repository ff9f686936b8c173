"""Cycle and stagnation counting from step completions."""

from __future__ import annotations

from typing import Any

import ax3l.shared.cycles as shared_cycles
from ax3l.shared.db.event_reads import StoredEvent
from ax3l.shared.registry import PARAMETER_ORDER


def count_cycles(events: list[StoredEvent]) -> shared_cycles.CycleCount:
    """The shared cycle rules over stored events, as the loop's tracker feeds them."""
    return shared_cycles.count_cycles((e.event_id, e.name, e.content) for e in events)


class History:
    """Builds an event history the way the loop writes it, from a golden configuration."""

    def __init__(self) -> None:
        self.events: list[StoredEvent] = []
        self.golden()

    def add(self, name: str, content: Any = None) -> None:
        self.events.append(
            StoredEvent(len(self.events) + 1, name, "INFO", None, None, None, None, content)
        )

    def checkpoint(self, index: int) -> None:
        self.add(
            "round_robin_checkpoint", {"parameter_order": list(PARAMETER_ORDER), "index": index}
        )

    def step(self, index: int, exhausted: bool = False) -> None:
        self.checkpoint(index)
        name = "parameter_space_exhausted" if exhausted else "configuration_compared"
        self.add(name, {"index": index, "parameter": PARAMETER_ORDER[index]})

    def golden(self) -> None:
        self.add("golden_config_created", {"kind": "promotion"})

    def cycle(self, improve_at: int | None = None) -> None:
        for index in range(7):
            self.step(index, exhausted=index % 2 == 1)
            if improve_at == index:
                self.golden()


def test_complete_cycles_need_all_seven_steps_in_order() -> None:
    """A cycle counts once all seven entries completed, compared or skipped, in order."""
    history = History()
    history.cycle()
    for index in range(4):
        history.step(index)
    count = count_cycles(history.events)
    assert (count.complete, count.stagnant, count.progress) == (1, 1, 4)


def test_a_cycle_with_an_improvement_is_not_stagnant_and_resets_the_count() -> None:
    """Stagnation counts only cycles that began after the latest golden configuration."""
    history = History()
    history.cycle()
    history.cycle()
    history.cycle(improve_at=3)
    history.cycle()
    count = count_cycles(history.events)
    assert (count.complete, count.stagnant) == (4, 1)


def test_a_repeated_step_counts_once_and_a_gap_breaks_the_cycle() -> None:
    """The same step reported twice counts once; a missing step means no cycle."""
    history = History()
    for index in range(7):
        history.step(index)
        if index == 2:
            history.add("configuration_compared", {"index": 2})
    for index in (0, 1, 3, 4, 5, 6):
        history.step(index)
    count = count_cycles(history.events)
    assert count.complete == 1


def test_seeding_and_rotation_events_are_not_steps() -> None:
    """Completions without a step index (none are written today) never count."""
    history = History()
    history.add("configuration_compared", {"reason": "no index"})
    history.cycle()
    assert count_cycles(history.events).complete == 1


def test_counts_what_the_status_bar_shows() -> None:
    """Four cycles, the two after the latest golden stagnant, three steps into the fifth: the
    figures the loop and the reports' status bar both show (both count with ax3l.shared.cycles)."""
    history = History()
    history.cycle()
    history.cycle(improve_at=6)
    history.cycle()
    history.cycle()
    for index in range(3):
        history.step(index)
    counted = count_cycles(history.events)
    assert (counted.complete, counted.stagnant, counted.progress) == (4, 2, 3)
