"""Turn integrity: a proposal is handled only for the entry of the live round-robin turn.

The live turn is the latest ``round_robin_checkpoint`` while nothing has answered it
(``ax3l.shared.turn_state``, the rule the orchestrator's turns follow too). Everything else is
refused before any value is checked, so a stray client (a standalone MCP session bound to
another entry, a late second submission after acceptance, a submission before the orchestrator
opened any turn) can neither steer the experiment nor leave proposal events on a turn that is
not its own.

Pending submission intents are reconciled first: a run a crashed or timed-out submission of
this turn left behind is adopted before the check, so it counts as the turn's accepted
proposal and a resubmission is refused instead of becoming a second run for the same turn.
While an intent of this turn is still pending (SnakeLab's answer was lost and its run has not
appeared yet) the turn's outcome is unknown, and proposals wait until it is settled
(``ax3l.shared.db.intents``: by the broker that sent it, or by the orchestrator before it asks the
turn again). An intent of an older checkpoint does not hold the live turn: adopted, it names
its own checkpoint and does not answer this one (``turn_state.belongs_to``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db import intents
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import ProposalAccepted
from ax3l.shared.registry import PARAMETER_ORDER
from ax3l.shared.turn_state import TurnState, latest_turn_state
from ax3l.toolbroker.results import TurnRefused

NOTHING_DONE = "nothing was validated or submitted"


def describe(state: TurnState) -> str:
    """``gamma (round-robin index 4, checkpoint event 812)``."""
    return (
        f"{state.parameter} (round-robin index {state.index},"
        f" checkpoint event {state.checkpoint_event_id})"
    )


@dataclass(eq=False)
class TurnGate:
    """Admits a proposal for ``requested`` only during that entry's live turn."""

    db: Database
    schema: ConfigSchema
    log: EventLog
    index: ConfigIndex

    async def admit(self, requested: str) -> TurnState:
        """The live turn when it is ``requested``'s, else ``TurnRefused`` naming the turn."""
        await intents.reconcile(self.db, self.schema, self.log, index=self.index)
        state = await latest_turn_state(self.db)
        if state is None:
            raise self._refuse(
                "no_turn",
                requested,
                None,
                "no round-robin turn is open: the orchestrator has not stored a"
                f" round_robin_checkpoint yet, so no proposal for {requested} is accepted",
            )
        if not state.order_matches:
            raise self._refuse(
                "order_changed",
                requested,
                state,
                f"the latest round_robin_checkpoint (event {state.checkpoint_event_id}) has the"
                f" parameter order {state.parameter_order!r} and index {state.index!r}, not one"
                f" of this Ax3l's {list(PARAMETER_ORDER)!r}; the orchestrator must resolve"
                " that first",
            )
        if state.answer is not None:
            if state.answer.name == ProposalAccepted.event:
                done = (
                    f"already has its accepted proposal (run {state.answer.run_id},"
                    f" event {state.answer.event_id})"
                )
            else:
                done = f"was skipped as exhausted (event {state.answer.event_id})"
            raise self._refuse(
                "turn_answered",
                requested,
                state,
                f"the current turn, {describe(state)}, {done}; a proposal for {requested} is"
                " not accepted until the orchestrator opens the next turn",
            )
        if state.parameter != requested:
            raise self._refuse(
                "other_entry",
                requested,
                state,
                f"the current turn is {describe(state)}; only a proposal for"
                f" {state.parameter} is accepted now, not one for {requested}",
            )
        pending = [
            intent
            for intent in await intents.pending_intents(self.db)
            if intent.checkpoint_event_id in (None, state.checkpoint_event_id)
        ]
        if pending:
            ids = ", ".join(str(intent.intent_id) for intent in pending)
            raise self._refuse(
                "outcome_unknown",
                requested,
                state,
                f"the current turn, {describe(state)}, may already have its proposal: the"
                f" outcome of submission intent {ids} is still unknown (SnakeLab's answer was"
                " lost or late); it is adopted when its run appears, or closed once SnakeLab"
                " answers again without that run",
                pending_intent_ids=[intent.intent_id for intent in pending],
            )
        return state

    def _refuse(
        self,
        reason: str,
        requested: str,
        state: TurnState | None,
        message: str,
        **extra: Any,
    ) -> TurnRefused:
        details: dict[str, Any] = {"reason": reason, "requested": requested}
        if state is not None:
            details.update(
                checkpoint_event_id=state.checkpoint_event_id,
                index=state.index,
                parameter=state.parameter,
            )
            if state.answer is not None:
                details["answered_by"] = {
                    "event_id": state.answer.event_id,
                    "name": state.answer.name,
                    "run_id": state.answer.run_id,
                }
        details.update(extra)
        return TurnRefused(f"{message}; {NOTHING_DONE}", details)
