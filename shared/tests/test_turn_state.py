"""The round-robin turn as the events record it (``ax3l.shared.turn_state``), on the in-memory
twin: which event answers the latest checkpoint, and when a checkpoint cannot be resumed from.
(``shared/tests/contract`` pins that MariaDB reads the same.)"""

from __future__ import annotations

import pytest

from ax3l.shared.event_models import (
    ParameterSpaceExhausted,
    ProposalAccepted,
    RoundRobinCheckpoint,
)
from ax3l.shared.registry import PARAMETER_ORDER
from ax3l.shared.turn_state import latest_turn_state, turn_proposals
from ax3l.testing.memory_store import MemoryEvents

ORDER = list(PARAMETER_ORDER)
RUNNER = "00000000-0000-0000-0000-00000000000a"


async def checkpoint(store: MemoryEvents, index: int, order: object = None) -> int:
    content = {"parameter_order": ORDER if order is None else order, "index": index}
    return await store.log("round_robin_checkpoint", content)


async def test_no_checkpoint_no_turn_and_a_new_checkpoint_is_open() -> None:
    """Before the first checkpoint there is no turn; the latest checkpoint is the live turn,
    open for its entry until something answers it."""
    store = MemoryEvents()
    assert await latest_turn_state(store) is None
    await checkpoint(store, 0)
    second = await checkpoint(store, 3)
    state = await latest_turn_state(store)
    assert state is not None and state.checkpoint_event_id == second
    assert (state.open, state.parameter, state.order_problem) == (True, ORDER[3], None)


async def test_a_proposal_naming_the_checkpoint_answers_it_with_its_run() -> None:
    """A proposal naming the checkpoint answers it; its run is the content's ``run_id``, else
    the event's process id."""
    store = MemoryEvents()
    live = await checkpoint(store, 1)
    accepted = await store.log(
        ProposalAccepted(checkpoint_event_id=live, parameter=ORDER[1]), process_id=RUNNER
    )
    await store.log(ProposalAccepted(checkpoint_event_id=live, run_id="later"))
    state = await latest_turn_state(store)
    assert state is not None and state.answer is not None and not state.open
    assert (state.answer.event_id, state.answer.name, state.answer.run_id) == (
        accepted,
        "proposal_accepted",
        RUNNER,
    )
    assert [p.event_id for p in await turn_proposals(store, live)] == [accepted, accepted + 1]


async def test_a_late_proposal_of_an_older_checkpoint_does_not_answer_the_live_one() -> None:
    """An adopted intent of an older turn names that turn: the live turn stays open; an
    unnamed proposal after the checkpoint belongs to it and answers it."""
    store = MemoryEvents()
    older = await checkpoint(store, 0)
    live = await checkpoint(store, 1)
    await store.log(ProposalAccepted(checkpoint_event_id=older, run_id="adopted"))
    state = await latest_turn_state(store)
    assert state is not None and state.open
    assert await turn_proposals(store, live) == []
    unnamed = await store.log(ProposalAccepted(run_id="r-2"))
    state = await latest_turn_state(store)
    assert state is not None and state.answer is not None
    assert (state.answer.event_id, state.answer.run_id) == (unnamed, "r-2")


async def test_a_proposal_before_the_checkpoint_does_not_answer_it_but_an_exhaustion_does() -> None:
    """What came before the checkpoint answers nothing; an exhaustion skip after it answers it
    without a run."""
    store = MemoryEvents()
    await store.log(ProposalAccepted(run_id="before"))
    live = await checkpoint(store, 2)
    assert (state := await latest_turn_state(store)) is not None and state.open
    skipped = await store.log(ParameterSpaceExhausted(parameter=ORDER[2], index=2))
    state = await latest_turn_state(store)
    assert state is not None and state.checkpoint_event_id == live and state.answer is not None
    assert (state.answer.event_id, state.answer.name, state.answer.run_id) == (
        skipped,
        "parameter_space_exhausted",
        None,
    )


@pytest.mark.parametrize(
    ("order", "index", "says"),
    [
        (list(reversed(ORDER)), 0, "has the parameter order"),
        (ORDER, len(ORDER), f"has the index {len(ORDER)}"),
        (ORDER, -1, "has the index -1"),
        (ORDER, "2", "has the index '2'"),
    ],
)
async def test_a_checkpoint_of_another_order_or_index_cannot_be_resumed(
    order: object, index: object, says: str
) -> None:
    """A checkpoint whose order is not this Ax3l's, or whose index does not point into it, has
    no entry, and its problem names the stored value and the way out."""
    store = MemoryEvents()
    live = await store.log("round_robin_checkpoint", {"parameter_order": order, "index": index})
    state = await latest_turn_state(store)
    assert state is not None and not state.order_matches and state.parameter is None
    assert state.order_problem is not None
    assert f"(event {live}) {says}" in state.order_problem
    assert "ax3l-db reset-events --yes" in state.order_problem


async def test_the_checkpoint_model_and_the_stored_content_agree() -> None:
    """A checkpoint written as its model is read as the same order and index."""
    store = MemoryEvents()
    await store.log(RoundRobinCheckpoint(parameter_order=ORDER, index=4))
    state = await latest_turn_state(store)
    assert state is not None
    assert (state.parameter_order, state.index, state.parameter) == (ORDER, 4, ORDER[4])
