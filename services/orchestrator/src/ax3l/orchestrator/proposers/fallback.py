"""The model with a fallback: a turn the model keeps failing is proposed by a classical proposer.

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

logger = logging.getLogger(__name__)

TURN_MOVED = ("proposal_accepted", "parameter_space_exhausted")


async def failure_streak(db: Database, proposer: str) -> int:
    """Failed conversations of ``proposer`` since the turn last moved on."""
    row = await db.fetchone(
        "SELECT COALESCE(MAX(event_id), 0) AS last FROM events WHERE name IN (%s, %s)",
        TURN_MOVED,
        doing="reading the last completed turn",
    )
    last = int(row["last"]) if row else 0
    row = await db.fetchone(
        "SELECT COUNT(*) AS n FROM events WHERE name = 'conversation_ended'"
        " AND source_name = %s AND log_level = 'ERROR' AND event_id > %s",
        (proposer, last),
        doing="counting the model's failed conversations",
    )
    return int(row["n"]) if row else 0


class ModelWithFallback(Proposer):
    """Proposes with ``model`` until it failed ``after`` times on a turn, then with ``fallback``."""

    def __init__(self, deps: ProposerDeps, model: Proposer, fallback: Proposer, after: int):
        super().__init__(deps)
        self.model = model
        self.fallback = fallback
        self.after = after
        self.name = model.name
        deps.status.fallback_proposer = fallback.name
        deps.status.llm_fallback_after = after

    async def close(self) -> None:
        try:
            await self.model.close()
        finally:
            await self.fallback.close()

    async def speculate(self, ahead: TurnAhead, note: dict[str, Any] | None = None) -> None:
        # The streak only moves at the turn's end, so the model is who will take ``ahead``.
        if await failure_streak(self.deps.db, self.model.name) < self.after:
            await self.model.speculate(ahead, note)

    def held_entry(self) -> str | None:
        return self.model.held_entry()

    async def propose(self, ctx: TurnContext, note: dict[str, Any] | None = None) -> str:
        status = self.deps.status
        streak = await failure_streak(self.deps.db, self.model.name)
        status.failure_streak = streak
        if streak < self.after:
            try:
                run_id = await self.model.propose(ctx, note)
            except ConversationFailed:
                status.failure_streak = streak + 1
                raise
            status.failure_streak = 0
            return run_id
        logger.warning(
            "%s failed %d conversations in a row on %s: %s proposes this turn",
            self.model.name,
            streak,
            ctx.turn.entry.name,
            self.fallback.name,
        )
        run_id = await self.fallback.propose(
            ctx, {**(note or {}), "fallback_for": self.model.name, "failure_streak": streak}
        )
        status.failure_streak = 0
        return run_id

    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        raise NotImplementedError("ModelWithFallback delegates whole conversations")
