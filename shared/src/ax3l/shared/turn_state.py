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

import json
from dataclasses import dataclass
from typing import Any

from ax3l.shared.db.database import Database
from ax3l.shared.registry import PARAMETER_ORDER

ANSWERING_EVENTS = ("proposal_accepted", "parameter_space_exhausted")


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


def _parsed(text: str | None) -> Any:
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


def _answer(row: dict[str, Any], checkpoint_id: int) -> Answer | None:
    """The answer ``row`` (an event after the checkpoint) gives it, if any."""
    if row["name"] != "proposal_accepted":
        return Answer(int(row["event_id"]), str(row["name"]), None)
    content = _parsed(row["content"])
    content = content if isinstance(content, dict) else {}
    named = content.get("checkpoint_event_id")
    if type(named) is int and named != checkpoint_id:
        return None
    run_id = content.get("run_id")
    run_id = run_id if isinstance(run_id, str) else row["process_id"]
    return Answer(int(row["event_id"]), "proposal_accepted", run_id)


async def latest_turn_state(db: Database) -> TurnState | None:
    """The latest checkpoint and its answer, or None before the first checkpoint."""
    row = await db.fetchone(
        "SELECT e.event_id, m.content FROM events e"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id"
        " WHERE e.name = 'round_robin_checkpoint' ORDER BY e.event_id DESC LIMIT 1",
        doing="reading the latest round-robin checkpoint",
    )
    if row is None:
        return None
    checkpoint_id = int(row["event_id"])
    content = _parsed(row["content"])
    content = content if isinstance(content, dict) else {}
    marks = ", ".join(["%s"] * len(ANSWERING_EVENTS))
    # Only the events of the latest turn are read: a handful.
    after = await db.fetchall(
        "SELECT e.event_id, e.name, e.process_id, m.content FROM events e"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id"
        f" WHERE e.event_id > %s AND e.name IN ({marks}) ORDER BY e.event_id",
        (checkpoint_id, *ANSWERING_EVENTS),
        doing="reading whether the round-robin turn has its proposal",
    )
    answer = next(
        (found for row in after if (found := _answer(row, checkpoint_id)) is not None), None
    )
    return TurnState(
        checkpoint_event_id=checkpoint_id,
        index=content.get("index"),
        parameter_order=content.get("parameter_order"),
        answer=answer,
    )
