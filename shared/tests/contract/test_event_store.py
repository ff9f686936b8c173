"""The events store's contract (``ax3l.shared.db.event_store.EventStore``), pinned on MariaDB and
on the in-memory twin alike: what a rule's test shows on the twin holds on the real store."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ax3l.shared.cycles import CycleTracker
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.event_log import MAX_CONTENT_BYTES, TRUNCATED_HEAD_CHARS, HighscoreRow
from ax3l.shared.db.event_store import EventStore
from ax3l.shared.db.reads import current_golden, latest_golden_row
from ax3l.shared.event_models import (
    ConfigurationCompared,
    GoldenConfigCreated,
    ProposalAccepted,
    RoundRobinCheckpoint,
)
from ax3l.shared.events import UnknownEvent
from ax3l.shared.registry import PARAMETER_ORDER
from ax3l.shared.turn_state import latest_turn_state

ORDER = list(PARAMETER_ORDER)
P1 = "00000000-0000-0000-0000-000000000001"
P2 = "00000000-0000-0000-0000-000000000002"


async def test_ids_increase_and_reads_are_oldest_first(store: EventStore) -> None:
    """Each write gets a larger id; ``select`` returns oldest first, ``newest`` n and
    ``oldest`` n are the ends of that order, and names may be a model, a name or several."""
    ids = []
    for index in range(5):
        ids.append(await store.log(RoundRobinCheckpoint(parameter_order=ORDER, index=index)))
        ids.append(await store.log("configuration_compared", {"reason": str(index)}))
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    checkpoints = await store.select(RoundRobinCheckpoint)
    assert [event.event_id for event in checkpoints] == ids[0::2]
    assert [event.model.index for event in checkpoints] == [0, 1, 2, 3, 4]
    both = await store.select([RoundRobinCheckpoint, "configuration_compared"])
    assert [event.event_id for event in both] == ids
    assert [e.event_id for e in await store.select("configuration_compared", newest=2)] == ids[7::2]
    assert [e.event_id for e in await store.select(RoundRobinCheckpoint, oldest=2)] == ids[0:4:2]
    assert await store.select(RoundRobinCheckpoint, newest=0) == []
    assert await store.select(RoundRobinCheckpoint, oldest=0) == []
    assert await store.select("golden_config_created") == []
    newest = await store.latest([RoundRobinCheckpoint, ConfigurationCompared])
    assert newest is not None and newest.event_id == ids[-1]
    assert newest.name == "configuration_compared" and newest.log_level == "INFO"
    assert newest.occurred_at is not None
    assert await store.latest("golden_config_created") is None


async def test_each_filter_must_match_and_none_filters_nothing(store: EventStore) -> None:
    """``after``/``before`` bound the id, ``process_id``(s), ``parent``, ``source_name`` and
    ``level`` must be equal; an empty ``process_ids`` matches nothing; a None filter is none."""
    first = await store.log("configuration_compared", {"n": 1}, process_id=P1)
    second = await store.log(
        "configuration_compared", {"n": 2}, process_id=P2, parent_event_id=first, level="WARNING"
    )
    third = await store.log("configuration_compared", {"n": 3}, source_name="seat-a")
    await store.log("golden_config_created", {"n": 4}, process_id=P1)

    async def ids(**filters: Any) -> list[int]:
        found = await store.select(ConfigurationCompared, **filters)
        return [event.event_id for event in found]

    assert await ids() == [first, second, third]
    assert await ids(after=first) == [second, third]
    assert await ids(before=third) == [first, second]
    assert await ids(after=first, before=third) == [second]
    assert await ids(process_id=P1) == [first]
    assert await ids(process_ids=[P1, P2]) == [first, second]
    assert await ids(process_ids=[]) == []
    assert await ids(parent=first) == [second]
    assert await ids(source_name="seat-a") == [third]
    assert await ids(level="WARNING") == [second]
    assert await ids(after=None, process_id=None, level=None) == [first, second, third]
    found = (await store.select(ConfigurationCompared, parent=first))[0]
    assert (found.process_id, found.parent_event_id, found.source_name) == (P2, first, None)
    assert await store.count(ConfigurationCompared) == 3
    assert await store.count([ConfigurationCompared, "golden_config_created"]) == 4
    assert await store.count(ConfigurationCompared, after=first) == 2
    assert await store.count(ConfigurationCompared, source_name="seat-a") == 1
    assert await store.count(ConfigurationCompared, level="WARNING") == 1
    latest_of_p1 = await store.latest(
        ["configuration_compared", "golden_config_created"], process_id=P1
    )
    assert latest_of_p1 is not None and latest_of_p1.name == "golden_config_created"


@pytest.mark.parametrize(
    ("content", "read_back"),
    [
        ({"a": [1, 2.5, None], "é": "ü"}, {"a": [1, 2.5, None], "é": "ü"}),
        ([1, "two"], [1, "two"]),
        ("a prompt", "a prompt"),
        ("42", "42"),
        ('"hi"', '"hi"'),
        ("null", "null"),
        ("{not json", "{not json"),
        (None, None),
    ],
)
async def test_a_content_reads_back_as_the_one_parser_reads_its_text(
    store: EventStore, content: object, read_back: object
) -> None:
    """Strings are stored as they are, everything else as JSON, and read back by
    ``parse_message``: an object or array as JSON, any other text as that text."""
    event_id = await store.log("prompt_sent", content)
    [event] = await store.select("prompt_sent")
    assert event.event_id == event_id and event.content == read_back


async def test_a_model_is_stored_as_its_content_and_read_as_its_model(store: EventStore) -> None:
    """A content model is stored as its JSON and read back as that model."""
    await store.log(ProposalAccepted(parameter="gamma", run_id="r-1", checkpoint_event_id=7))
    event = await store.latest(ProposalAccepted)
    assert event is not None and isinstance(event.model, ProposalAccepted)
    assert (event.model.run_id, event.model.checkpoint_event_id) == ("r-1", 7)
    assert event.field("parameter") == "gamma" and event.field("missing", 3) == 3


async def test_a_content_over_one_mebibyte_is_stored_as_its_truncation_marker(
    store: EventStore,
) -> None:
    """A content over 1 MiB (in UTF-8) becomes ``{"truncated": true, ...}`` with its head; one
    just under the cap is stored whole."""
    whole = "ä" * (MAX_CONTENT_BYTES // 2)  # exactly 1 MiB in UTF-8
    await store.log("reply_received", whole)
    await store.log("reply_received", whole + "x")
    kept, cut = await store.select("reply_received")
    assert kept.content == whole
    assert cut.content == {
        "truncated": True,
        "event": "reply_received",
        "bytes": MAX_CONTENT_BYTES + 1,
        "head": whole[:TRUNCATED_HEAD_CHARS],
    }


async def test_the_golden_row_is_the_newest_golden_with_a_content(store: EventStore) -> None:
    """The golden row skips a golden without content, carries its highscore row (None without
    one), and ``current_golden`` reads it strictly."""
    assert await latest_golden_row(store) is None and await current_golden(store) is None
    golden = GoldenConfigCreated(
        kind="promotion",
        run_id="r-1",
        config={"seed": 3},
        high_score=41,
        seed=3,
        simulations=5,
        reason="better",
    )
    first = await store.log(golden, highscore=HighscoreRow(simulations=5, score=41, seed=3))
    row = await latest_golden_row(store)
    assert row is not None
    assert (row["event_id"], row["score"], row["seed"], row["simulations"]) == (first, 41, 3, 5)
    assert json.loads(row["content"]) == golden.stored()
    second = await store.log(golden)
    await store.log("golden_config_created")  # no content: made by hand, not a golden
    row = await latest_golden_row(store)
    assert row is not None and row["event_id"] == second
    assert (row["score"], row["seed"], row["simulations"]) == (None, None, None)
    current = await current_golden(store)
    assert current is not None and current[0] == second and current[1].run_id == "r-1"


async def test_a_missing_parent_or_an_unknown_event_is_refused(store: EventStore) -> None:
    """A parent must be a stored event, and an event must be in the catalog."""
    with pytest.raises(DatabaseError):
        await store.log("configuration_compared", {"n": 1}, parent_event_id=999_999)
    with pytest.raises(UnknownEvent):
        await store.log("no_such_event", {"n": 1})
    assert await store.count(ConfigurationCompared) == 0
    event_id = await store.log("configuration_compared", {"n": 1})
    assert await store.has_event(event_id) and not await store.has_event(event_id + 1)


async def test_the_rules_read_the_same_on_both(store: EventStore) -> None:
    """The turn state and the cycle tracker, given the store, see the same history."""
    assert await latest_turn_state(store) is None
    checkpoint = await store.log(RoundRobinCheckpoint(parameter_order=ORDER, index=2))
    state = await latest_turn_state(store)
    assert state is not None and state.open and state.parameter == ORDER[2]
    accepted = await store.log(ProposalAccepted(run_id="r-9", checkpoint_event_id=checkpoint))
    state = await latest_turn_state(store)
    assert state is not None and state.answer is not None
    assert (state.answer.event_id, state.answer.run_id) == (accepted, "r-9")
    for index in range(len(ORDER)):
        await store.log(RoundRobinCheckpoint(parameter_order=ORDER, index=index))
        await store.log(ConfigurationCompared(reason="x"))
    assert (await CycleTracker().refresh(store)).complete == 1
