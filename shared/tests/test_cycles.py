import json

from ax3l.shared.cycles import CycleCounter, CycleTracker, checkpoint_position, count_cycles
from ax3l.shared.db.event_log import HighscoreRow
from ax3l.shared.event_models import (
    ConfigurationCompared,
    GoldenConfigCreated,
    RoundRobinCheckpoint,
)
from ax3l.shared.registry import PARAMETER_ORDER
from ax3l.testing.memory_store import MemoryEvents

ORDER = list(PARAMETER_ORDER)
GOLDEN = GoldenConfigCreated(run_id="g", config={}, high_score=1, seed=1, simulations=1, reason="x")


class History:
    """Builds an event list the way the loop writes it, with increasing ids."""

    def __init__(self) -> None:
        self.events: list[tuple[int, str, object]] = []

    def add(self, name: str, content: object = None) -> int:
        event_id = len(self.events) + 1
        self.events.append((event_id, name, content))
        return event_id

    def checkpoint(self, index: int, order: list[str] | None = None) -> int:
        return self.add(
            "round_robin_checkpoint",
            json.dumps({"parameter_order": order or ORDER, "index": index}),
        )

    def step(self, index: int, *, exhausted: bool = False, golden: bool = False) -> None:
        self.checkpoint(index)
        if exhausted:
            self.add("parameter_space_exhausted")
            return
        self.add("proposal_accepted")
        self.add("configuration_compared")
        if golden:
            self.add("golden_config_created")

    def cycle(self, golden_at: int | None = None) -> None:
        for index in range(7):
            self.step(index, golden=index == golden_at)


def test_no_events_no_cycles():
    """An empty history has no cycles, no progress and no position."""
    count = count_cycles([])
    assert (count.complete, count.stagnant, count.progress, count.index) == (0, 0, 0, None)


def test_seven_compared_steps_make_one_stagnant_cycle():
    """Indices 0..6 each compared once, in order, make one cycle; without a golden it stagnates."""
    history = History()
    history.add("golden_config_created")  # the initial baseline precedes every checkpoint
    history.cycle()
    count = count_cycles(history.events)
    assert (count.complete, count.stagnant, count.progress) == (1, 1, 0)


def test_exhausted_steps_count_as_completed():
    """A step skipped as exhausted completes it just like a comparison."""
    history = History()
    for index in range(7):
        history.step(index, exhausted=index in (0, 2, 6))
    assert count_cycles(history.events).complete == 1


def test_partial_cycle_reports_progress():
    """Four completed steps are progress, not a cycle."""
    history = History()
    history.cycle()
    for index in range(4):
        history.step(index)
    history.checkpoint(4)
    count = count_cycles(history.events)
    assert (count.complete, count.progress, count.index) == (1, 4, 4)


def test_checkpoint_repeated_after_restart_counts_its_step_once():
    """A restart that logs the same checkpoint again and a repeated comparison count once."""
    history = History()
    history.checkpoint(0)
    history.checkpoint(0)  # restarted while the LLM was thinking
    history.add("configuration_compared")
    history.add("configuration_compared")  # recovery compared the same run again
    for index in range(1, 7):
        history.step(index)
    count = count_cycles(history.events)
    assert (count.complete, count.progress) == (1, 0)


def test_step_without_completion_breaks_the_cycle():
    """A step whose run failed (retained, never compared) leaves that pass without a cycle."""
    history = History()
    for index in range(7):
        if index == 3:
            history.checkpoint(3)
            history.add("proposal_accepted")
            history.add("golden_config_retained")
        else:
            history.step(index)
    history.cycle()
    count = count_cycles(history.events)
    assert count.complete == 1


def test_golden_inside_a_cycle_keeps_it_from_stagnating():
    """A cycle containing an improvement is complete but not stagnant; later ones are."""
    history = History()
    history.cycle(golden_at=3)
    history.cycle()
    history.cycle()
    count = count_cycles(history.events)
    assert (count.complete, count.stagnant) == (3, 2)


def test_golden_right_after_the_last_step_resets_stagnation():
    """A golden created by the cycle's final comparison still resets the count."""
    history = History()
    history.cycle()
    history.cycle(golden_at=6)
    assert count_cycles(history.events).stagnant == 0


def test_seed_baseline_resets_stagnation():
    """Nine stagnant cycles, then a seed baseline golden: the count starts again."""
    history = History()
    for _ in range(9):
        history.cycle()
    assert count_cycles(history.events).stagnant == 9
    history.add("seed_rotation_started")
    history.add("golden_config_created")
    history.cycle()
    count = count_cycles(history.events)
    assert (count.complete, count.stagnant) == (10, 1)


def test_new_parameter_order_drops_the_partial_cycle():
    """A checkpoint with another order starts over: earlier progress does not carry."""
    history = History()
    for index in range(5):
        history.step(index)
    other = list(reversed(ORDER))
    history.checkpoint(5, other)
    history.add("configuration_compared")
    history.checkpoint(6, other)
    history.add("configuration_compared")
    assert count_cycles(history.events).complete == 0


def test_unreadable_checkpoint_attributes_nothing():
    """A checkpoint without a usable index makes the following completion count for nothing."""
    assert checkpoint_position('{"parameter_order": ["a"], "index": 3}') is None
    assert checkpoint_position("not json") is None
    assert checkpoint_position({"parameter_order": ["a", "b"], "index": True}) is None
    history = History()
    history.add("round_robin_checkpoint", "{broken")
    history.add("configuration_compared")
    count = count_cycles(history.events)
    assert (count.complete, count.progress, count.index) == (0, 0, None)


def test_completion_that_names_its_index_needs_no_readable_checkpoint():
    """A comparison or skip whose content carries ``index`` counts for that step."""
    history = History()
    for index in range(7):
        history.add("round_robin_checkpoint", "{broken")
        history.add("configuration_compared", json.dumps({"index": index, "reason": "x"}))
    assert count_cycles(history.events).complete == 1
    only_completions = History()
    for index in range(7):
        only_completions.add("parameter_space_exhausted", {"index": index})
    assert count_cycles(only_completions.events).complete == 1


def test_completion_index_wins_over_the_checkpoint():
    """When the completion names its step, that step completes, not the checkpoint's."""
    history = History()
    for index in range(7):
        history.checkpoint(0)  # a checkpoint that says otherwise
        history.add("configuration_compared", {"index": index})
    assert count_cycles(history.events).complete == 1


def test_incremental_feeding_equals_one_pass():
    """Feeding a history in two parts gives the same count as feeding it at once."""
    history = History()
    for _ in range(3):
        history.cycle(golden_at=2)
    history.cycle()
    history.step(0)
    counter = CycleCounter()
    for event in history.events[:40]:
        counter.feed(*event)
    first = counter.count()
    for event in history.events[40:]:
        counter.feed(*event)
    assert counter.count() == count_cycles(history.events)
    assert first.complete < counter.count().complete


async def _log_cycle(store: MemoryEvents, golden_at: int | None = None) -> None:
    for index in range(7):
        await store.log(RoundRobinCheckpoint(parameter_order=ORDER, index=index))
        await store.log(ConfigurationCompared(reason="x"))
        if index == golden_at:
            await store.log(GOLDEN, highscore=HighscoreRow(1, 1, 1))


async def test_tracker_reads_new_events_and_starts_over_after_a_wipe():
    """The tracker counts what was written, picks up later events, and resets on a wipe (on the
    twin: the contract suite pins that MariaDB reads the same)."""
    store = MemoryEvents()
    tracker = CycleTracker()
    await _log_cycle(store)
    assert (await tracker.refresh(store)).complete == 1
    await _log_cycle(store, golden_at=1)
    await _log_cycle(store)
    count = await tracker.refresh(store)
    assert (count.complete, count.stagnant) == (3, 1)
    store.clear()
    assert (await tracker.refresh(store)).complete == 0
    await _log_cycle(store)
    assert (await tracker.refresh(store)).complete == 1
