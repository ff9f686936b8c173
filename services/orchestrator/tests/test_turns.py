"""Turn selection (``ax3l.orchestrator.turns``) on the in-memory twin: the next entry follows
the latest checkpoint and its answer, and a checkpoint of another order stops the loop.
(Crash tests of the same rule, on MariaDB and real processes, are in test_crash_recovery.)"""

from __future__ import annotations

import pytest

from ax3l.orchestrator.turns import (
    ParameterOrderChanged,
    Turn,
    check_stored_order,
    next_turn,
    write_checkpoint,
)
from ax3l.shared.event_models import ParameterSpaceExhausted, ProposalAccepted
from ax3l.shared.registry import PARAMETER_ORDER
from ax3l.testing.memory_store import MemoryEvents

LOOP = "00000000-0000-0000-0000-000000001000"


async def test_a_fresh_experiment_starts_at_the_first_entry() -> None:
    store = MemoryEvents()
    assert await next_turn(store) == Turn(0)
    await check_stored_order(store)  # nothing stored: nothing to refuse


async def test_an_unanswered_turn_is_taken_again_and_an_answered_one_moves_on() -> None:
    """A checkpoint without its answer (a restart mid-conversation) is the same turn; an
    accepted proposal or an exhaustion skip moves to the next entry, wrapping round."""
    store = MemoryEvents()
    checkpoint = await write_checkpoint(store, Turn(3), LOOP)
    [stored] = await store.select("round_robin_checkpoint")
    assert stored.event_id == checkpoint and stored.model.index == 3
    assert (stored.process_id, stored.source_name) == (LOOP, "RoundRobin")
    assert stored.model.parameter_order == list(PARAMETER_ORDER)
    assert await next_turn(store) == Turn(3)
    await store.log(ProposalAccepted(checkpoint_event_id=checkpoint, run_id="r-1"))
    assert await next_turn(store) == Turn(4)
    last = len(PARAMETER_ORDER) - 1
    await write_checkpoint(store, Turn(last), LOOP)
    assert await next_turn(store) == Turn(last)
    await store.log(ParameterSpaceExhausted(parameter=PARAMETER_ORDER[last], index=last))
    assert await next_turn(store) == Turn(0)


async def test_a_late_proposal_of_an_older_turn_does_not_move_the_live_one() -> None:
    """A proposal adopted late for an older checkpoint leaves the live turn where it is."""
    store = MemoryEvents()
    older = await write_checkpoint(store, Turn(0), LOOP)
    await write_checkpoint(store, Turn(1), LOOP)
    await store.log(ProposalAccepted(checkpoint_event_id=older, run_id="adopted"))
    assert await next_turn(store) == Turn(1)


async def test_a_checkpoint_of_another_order_stops_the_loop() -> None:
    """Neither the next turn nor the start check goes on from a checkpoint of another order."""
    store = MemoryEvents()
    order = list(reversed(PARAMETER_ORDER))
    await store.log("round_robin_checkpoint", {"parameter_order": order, "index": 0})
    with pytest.raises(ParameterOrderChanged, match="reset-events"):
        await next_turn(store)
    with pytest.raises(ParameterOrderChanged, match="reset-events"):
        await check_stored_order(store)
