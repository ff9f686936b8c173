"""The round-robin turn as the events record it: the one rule the orchestrator and the
toolbroker read.

The live turn is the latest ``round_robin_checkpoint``. A checkpoint is answered by a
``parameter_space_exhausted`` written after it, or by a ``proposal_accepted`` written after it
that belongs to it: one naming it as its ``checkpoint_event_id`` (written by the broker), or one
without that key (then it belongs to the latest checkpoint before it). A proposal after it that
names an older checkpoint (a submission intent adopted late, a stray client) does not answer it.

The orchestrator takes the checkpoint's entry again until it is answered, then the next one
(``ax3l.orchestrator.turns``); the toolbroker accepts a proposal only for the entry of an
unanswered latest checkpoint (``ax3l.toolbroker.turn_gate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ax3l.shared.db.event_reads import StoredEvent
from ax3l.shared.db.event_store import EventSource, events_of
from ax3l.shared.event_models import ParameterSpaceExhausted, ProposalAccepted, RoundRobinCheckpoint
from ax3l.shared.registry import PARAMETER_ORDER

ANSWERING_EVENTS = (ProposalAccepted.event, ParameterSpaceExhausted.event)


@dataclass(frozen=True)
class Answer:
    """The event that finished a checkpoint's turn."""

    event_id: int
    name: str
    run_id: str | None  # the accepted run; None for an exhaustion skip


def checkpoint_order_problem(
    checkpoint_event_id: int, parameter_order: Any, index: Any
) -> str | None:
    """Why a checkpoint cannot be resumed from, or None when its order and index are this
    Ax3l's.

    Takes the content as stored (not its model), so the message shows the value that is wrong.
    """
    if parameter_order != list(PARAMETER_ORDER):
        return (
            f"the latest round_robin_checkpoint (event {checkpoint_event_id}) has the parameter"
            f" order {parameter_order!r}, but this Ax3l visits {list(PARAMETER_ORDER)!r}. The"
            " order of an experiment cannot change and old checkpoints are not upgraded: back up"
            " the database, then reset the experiment events with `ax3l-db reset-events --yes`;"
            " SnakeLab still holds the runs, so take them as the new experiment's past with"
            " `ax3l-db adopt` (or start on an empty SnakeLab database), then start again"
        )
    if type(index) is not int or not 0 <= index < len(PARAMETER_ORDER):
        return (
            f"the latest round_robin_checkpoint (event {checkpoint_event_id}) has the index"
            f" {index!r}; reset the experiment events with `ax3l-db reset-events --yes`, then"
            " `ax3l-db adopt` (SnakeLab still holds the runs) and start again"
        )
    return None


def belongs_to(proposal: StoredEvent[ProposalAccepted], checkpoint_event_id: int) -> bool:
    """Whether ``proposal`` was made for the turn of the checkpoint ``checkpoint_event_id``
    (given that no other checkpoint lies between them when the proposal names none)."""
    named = proposal.model.checkpoint_event_id
    if named is not None:
        return named == checkpoint_event_id
    return proposal.event_id > checkpoint_event_id


def answer_of(event: StoredEvent[Any], checkpoint_event_id: int) -> Answer | None:
    """The answer ``event`` (one of ``ANSWERING_EVENTS``, written after the checkpoint) gives
    it, if any."""
    if not isinstance(event.model, ProposalAccepted):
        return Answer(event.event_id, event.name, None)
    if not belongs_to(event, checkpoint_event_id):
        return None
    proposal = event.model
    run_id = proposal.run_id if proposal.run_id is not None else event.process_id
    return Answer(event.event_id, ProposalAccepted.event, run_id)


async def latest_checkpoint(db: EventSource) -> StoredEvent[RoundRobinCheckpoint] | None:
    """The checkpoint of the live turn, or None before the first one."""
    return await events_of(db).latest(RoundRobinCheckpoint)


async def turn_proposals(
    db: EventSource, checkpoint_event_id: int
) -> list[StoredEvent[ProposalAccepted]]:
    """The accepted proposals of the checkpoint's turn, oldest first (normally at most one).

    Only meaningful for the latest checkpoint: an unnamed proposal after a later checkpoint
    belongs to that one."""
    after = await events_of(db).select(ProposalAccepted, after=checkpoint_event_id)
    return [proposal for proposal in after if belongs_to(proposal, checkpoint_event_id)]


async def turn_answer(db: EventSource, checkpoint_event_id: int) -> Answer | None:
    """The first event that answered the (latest) checkpoint's turn, or None while it is open."""
    # Only the events of the latest turn are read: a handful.
    after = await events_of(db).select(ANSWERING_EVENTS, after=checkpoint_event_id)
    return next(
        (found for event in after if (found := answer_of(event, checkpoint_event_id)) is not None),
        None,
    )


@dataclass(frozen=True)
class TurnState:
    """The latest checkpoint: its entry (None when its order or index is not this Ax3l's)
    and the event that answered it, if any."""

    checkpoint_event_id: int
    index: Any
    parameter_order: Any
    answer: Answer | None

    @property
    def order_problem(self) -> str | None:
        """Why the checkpoint cannot be resumed from (``checkpoint_order_problem``), or None."""
        return checkpoint_order_problem(self.checkpoint_event_id, self.parameter_order, self.index)

    @property
    def order_matches(self) -> bool:
        """The checkpoint's order is this Ax3l's and its index points into it."""
        return self.order_problem is None

    @property
    def parameter(self) -> str | None:
        """The entry the checkpoint's turn is for, or None when the order does not match."""
        return PARAMETER_ORDER[self.index] if self.order_matches else None

    @property
    def open(self) -> bool:
        """Still waiting for its proposal."""
        return self.answer is None


async def latest_turn_state(db: EventSource) -> TurnState | None:
    """The latest checkpoint and its answer, or None before the first checkpoint."""
    checkpoint = await latest_checkpoint(db)
    if checkpoint is None:
        return None
    # As stored, not as the model reads them: a refusal names the value that is wrong.
    return TurnState(
        checkpoint_event_id=checkpoint.event_id,
        index=checkpoint.field("index"),
        parameter_order=checkpoint.field("parameter_order"),
        answer=await turn_answer(db, checkpoint.event_id),
    )
