"""Turn selection: which round-robin entry is next, from the latest checkpoint.

A turn is the entry at the latest checkpoint's index, or the one after it once that turn
produced an accepted proposal or an exhaustion skip. Nothing else moves the position, so golden
and seed changes keep it, a restart mid-conversation resumes the same entry, and an accepted
proposal whose MCP reply was lost still advances exactly once.

A proposal belongs to the checkpoint its content names (``checkpoint_event_id``, written by the
broker); one without that key belongs to the latest checkpoint before it. A proposal of another
turn (a submission intent adopted late, a stray client) neither moves the turn nor is finished.
"""

from __future__ import annotations

from dataclasses import dataclass

from ax3l.orchestrator.event_reads import StoredEvent, latest, select
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import (
    ParameterSpaceExhausted,
    ProposalAccepted,
    RoundRobinCheckpoint,
)
from ax3l.shared.registry import ENTRIES, PARAMETER_ORDER, Entry

ADVANCING_EVENTS = (ProposalAccepted.event, ParameterSpaceExhausted.event)
PROPOSAL = ProposalAccepted.event


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


def checkpoint_order_problem(checkpoint: StoredEvent) -> str | None:
    """Why a checkpoint cannot be resumed from, or None when its order and index fit.

    Reads the content as stored (not its model), so the message shows the value that is wrong.
    """
    order = checkpoint.field("parameter_order")
    index = checkpoint.field("index")
    if order != list(PARAMETER_ORDER):
        return (
            f"the latest round_robin_checkpoint (event {checkpoint.event_id}) has the parameter"
            f" order {order!r}, but this Ax3l visits {list(PARAMETER_ORDER)!r}. The order of an"
            " experiment cannot change and old checkpoints are not upgraded: back up the"
            " database, then reset the experiment events with `ax3l-db reset-events --yes`"
            " and start again"
        )
    if type(index) is not int or not 0 <= index < len(PARAMETER_ORDER):
        return (
            f"the latest round_robin_checkpoint (event {checkpoint.event_id}) has the index"
            f" {index!r}; reset the experiment events with `ax3l-db reset-events --yes`"
        )
    return None


async def next_turn(db: Database) -> Turn:
    """The turn to take now (a fresh experiment starts at hidden size)."""
    checkpoint = await latest(db, RoundRobinCheckpoint)
    if checkpoint is None:
        return Turn(0)
    problem = checkpoint_order_problem(checkpoint)
    if problem:
        raise ParameterOrderChanged(problem)
    index = checkpoint.model.index
    assert index is not None  # checkpoint_order_problem checked it
    if await turn_answered(db, checkpoint):
        return Turn((index + 1) % len(PARAMETER_ORDER))
    return Turn(index)


def belongs_to(proposal: StoredEvent[ProposalAccepted], checkpoint: StoredEvent) -> bool:
    """Whether ``proposal`` (written after ``checkpoint``) was made for that checkpoint's turn."""
    named = proposal.model.checkpoint_event_id
    if named is not None:
        return named == checkpoint.event_id
    return proposal.event_id > checkpoint.event_id


async def turn_proposals(
    db: Database, checkpoint: StoredEvent
) -> list[StoredEvent[ProposalAccepted]]:
    """The accepted proposals of ``checkpoint``'s turn, oldest first (normally at most one)."""
    after = await select(db, ProposalAccepted, after=checkpoint.event_id)
    return [proposal for proposal in after if belongs_to(proposal, checkpoint)]


async def turn_answered(db: Database, checkpoint: StoredEvent) -> bool:
    """The checkpoint's turn has its accepted proposal or its exhaustion skip."""
    if await latest(db, ParameterSpaceExhausted, after=checkpoint.event_id) is not None:
        return True
    return bool(await turn_proposals(db, checkpoint))


async def check_stored_order(db: Database) -> None:
    """Refuse to start on a history with another parameter order (before any other work)."""
    checkpoint = await latest(db, RoundRobinCheckpoint)
    if checkpoint is not None:
        problem = checkpoint_order_problem(checkpoint)
        if problem:
            raise ParameterOrderChanged(problem)


async def write_checkpoint(log: EventLog, turn: Turn, process_id: str) -> int:
    """Store the order and index before the turn asks anyone for a proposal."""
    return await log.log(
        RoundRobinCheckpoint(parameter_order=list(PARAMETER_ORDER), index=turn.index),
        parameter=turn.parameter,
        source_name="RoundRobin",
        process_id=process_id,
    )


async def checkpoint_before(
    db: Database, event_id: int
) -> StoredEvent[RoundRobinCheckpoint] | None:
    """The checkpoint of the turn an event belongs to (the latest one before it)."""
    return await latest(db, RoundRobinCheckpoint, before=event_id)
