"""Proposers with a fallback: a turn the primary does not manage goes to a classical proposer.

``WithFallback`` is what every such pair shares: the primary's name, the fallback on the status,
start and close of both, pipelining through the primary, and the hand-over whose
``conversation_started`` says ``fallback_for``. When a turn is handed over is the subclass's:
``ModelWithFallback`` here, ``external.ExternalWithFallback`` for the seats (no seat answered
by the deadline, the same attempt).

A small local model can fail a turn forever (prose, timeouts, invented values). After
``AX3L_LLM_FALLBACK_AFTER`` failed model conversations in a row on one turn, that turn goes to
the fallback proposer (``AX3L_LLM_FALLBACK``: ``tpe`` or ``random``) through the same MCP path;
its ``conversation_started`` says ``fallback_for`` and the streak, so the event log and the
Proposers page show which turns the model did not manage. The next turn is the model's again.

The streak is read from the events, never kept in memory: it counts the model's failed
``conversation_ended`` since the last step that moved the turn on (an accepted proposal or an
exhaustion skip), so a restart neither forgets it nor resets it.
"""

from __future__ import annotations

import logging
from typing import Any

from ax3l.orchestrator.proposers.base import (
    ConversationFailed,
    Proposer,
    ProposerDeps,
    TurnAhead,
    TurnContext,
)
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import count, latest
from ax3l.shared.event_models import ConversationEnded
from ax3l.shared.turn_state import ANSWERING_EVENTS

logger = logging.getLogger(__name__)

TURN_MOVED = ANSWERING_EVENTS


async def failure_streak(db: Database, proposer: str) -> int:
    """Failed conversations of ``proposer`` since the turn last moved on."""
    moved = await latest(db, TURN_MOVED)
    last = moved.event_id if moved is not None else 0
    return await count(db, ConversationEnded, after=last, source_name=proposer, level="ERROR")


class WithFallback(Proposer):
    """``primary`` proposes; a subclass's ``propose`` decides which turns go to ``fallback``.

    The pair is named after the primary (events and status keep its name) and delegates whole
    conversations, so it never converses itself.
    """

    def __init__(self, deps: ProposerDeps, primary: Proposer, fallback: Proposer):
        super().__init__(deps)
        self.primary = primary
        self.fallback = fallback
        self.name = primary.name
        deps.status.fallback_proposer = fallback.name

    async def start(self) -> None:
        await self.primary.start()
        await self.fallback.start()

    async def close(self) -> None:
        try:
            await self.primary.close()
        finally:
            await self.fallback.close()

    async def speculate(self, ahead: TurnAhead, note: dict[str, Any] | None = None) -> None:
        await self.primary.speculate(ahead, note)

    def held_entry(self) -> str | None:
        return self.primary.held_entry()

    async def hand_over(
        self, ctx: TurnContext, note: dict[str, Any] | None, why: dict[str, Any]
    ) -> str:
        """The turn proposed by the fallback, its note saying whom it stands in for and ``why``."""
        return await self.fallback.propose(
            ctx, {**(note or {}), "fallback_for": self.primary.name, **why}
        )

    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        raise NotImplementedError(f"{type(self).__name__} delegates whole conversations")


class ModelWithFallback(WithFallback):
    """Proposes with ``model`` until it failed ``after`` times on a turn, then with ``fallback``.

    Unlike the seats' deadline, a failed model conversation ends the attempt (the loop backs
    off and retries): only the streak read from the events hands a later attempt over.
    """

    def __init__(self, deps: ProposerDeps, model: Proposer, fallback: Proposer, after: int):
        super().__init__(deps, model, fallback)
        self.after = after
        deps.status.llm_fallback_after = after

    async def speculate(self, ahead: TurnAhead, note: dict[str, Any] | None = None) -> None:
        # The streak only moves at the turn's end, so the model is who will take ``ahead``.
        if await failure_streak(self.deps.db, self.primary.name) < self.after:
            await self.primary.speculate(ahead, note)

    async def propose(self, ctx: TurnContext, note: dict[str, Any] | None = None) -> str:
        status = self.deps.status
        streak = await failure_streak(self.deps.db, self.primary.name)
        status.failure_streak = streak
        if streak < self.after:
            try:
                run_id = await self.primary.propose(ctx, note)
            except ConversationFailed:
                status.failure_streak = streak + 1
                raise
            status.failure_streak = 0
            return run_id
        logger.warning(
            "%s failed %d conversations in a row on %s: %s proposes this turn",
            self.primary.name,
            streak,
            ctx.turn.entry.name,
            self.fallback.name,
        )
        run_id = await self.hand_over(ctx, note, {"failure_streak": streak})
        status.failure_streak = 0
        return run_id
