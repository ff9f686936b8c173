"""The live round-robin turn as the events record it: the latest ``round_robin_checkpoint`` and
whether it has already been answered.

A checkpoint is answered by a ``parameter_space_exhausted`` written after it, or by a
``proposal_accepted`` written after it that belongs to it: one naming it as its
``checkpoint_event_id``, or one without that key (then it belongs to the latest checkpoint
before it). A proposal after it that names an older checkpoint (a submission intent adopted
late) does not answer it. This is the orchestrator's rule (``ax3l.orchestrator.turns``). The
toolbroker reads this before handling a proposal: it accepts one only for the entry of an
unanswered latest checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import StoredEvent, latest, select
from ax3l.shared.event_models import ParameterSpaceExhausted, ProposalAccepted, RoundRobinCheckpoint
from ax3l.shared.registry import PARAMETER_ORDER

ANSWERING_EVENTS = (ProposalAccepted.event, ParameterSpaceExhausted.event)


@dataclass(frozen=True)
class Answer:
    """The event that finished a checkpoint's turn."""

    event_id: int
    name: str
    run_id: str | None  # the accepted run; None for an exhaustion skip


@dataclass(frozen=True)
class TurnState:
    """The latest checkpoint: its entry (None when its order or index is not this Ax3l's)
    and the event that answered it, if any."""

    checkpoint_event_id: int
    index: Any
    parameter_order: Any
    answer: Answer | None

    @property
    def order_matches(self) -> bool:
        """The checkpoint's order is this Ax3l's and its index points into it."""
        return (
            self.parameter_order == list(PARAMETER_ORDER)
            and type(self.index) is int
            and 0 <= self.index < len(PARAMETER_ORDER)
        )

    @property
    def parameter(self) -> str | None:
        """The entry the checkpoint's turn is for, or None when the order does not match."""
        return PARAMETER_ORDER[self.index] if self.order_matches else None

    @property
    def open(self) -> bool:
        """Still waiting for its proposal."""
        return self.answer is None


def _answer(event: StoredEvent[Any], checkpoint_id: int) -> Answer | None:
    """The answer ``event`` (written after the checkpoint) gives it, if any."""
    if not isinstance(event.model, ProposalAccepted):
        return Answer(event.event_id, event.name, None)
    proposal = event.model
    named = proposal.checkpoint_event_id
    if named is not None and named != checkpoint_id:
        return None
    run_id = proposal.run_id if proposal.run_id is not None else event.process_id
    return Answer(event.event_id, ProposalAccepted.event, run_id)


async def latest_turn_state(db: Database) -> TurnState | None:
    """The latest checkpoint and its answer, or None before the first checkpoint."""
    checkpoint = await latest(db, RoundRobinCheckpoint)
    if checkpoint is None:
        return None
    # Only the events of the latest turn are read: a handful.
    after = await select(db, ANSWERING_EVENTS, after=checkpoint.event_id)
    answer = next(
        (found for event in after if (found := _answer(event, checkpoint.event_id)) is not None),
        None,
    )
    # As stored, not as the model reads them: a refusal names the value that is wrong.
    return TurnState(
        checkpoint_event_id=checkpoint.event_id,
        index=checkpoint.field("index"),
        parameter_order=checkpoint.field("parameter_order"),
        answer=answer,
    )
