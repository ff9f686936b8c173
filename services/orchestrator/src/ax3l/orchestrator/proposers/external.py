"""The ``external`` proposer: each turn is offered to the seats (outside agents) over MCP.

The loop opens the turn as for any proposer (checkpoint, exhaustion skip); this proposer then
logs ``conversation_started`` (proposer ``external``), puts the turn on the seats' board with
the prompts Ax3l's own model would get, and waits until a seat's submission is accepted or
``AX3L_EXTERNAL_DEADLINE`` seconds have passed. What answers the turn is read from the events:
a ``proposal_accepted`` that belongs to the turn's checkpoint (written by the broker), so a seat
whose MCP reply was lost still wins its turn, and a restart loses nothing (the turn is simply
opened again). The first accepted submission wins: the board refuses later ones, and the broker
refuses any proposal for an answered turn.

No accepted submission by the deadline: the turn goes to the fallback proposer
(``AX3L_LLM_FALLBACK``: ``tpe`` or ``random``; ``none`` opens the turn to the seats again after
the loop's backoff), whose ``conversation_started`` says ``"fallback_for": "external"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from ax3l.orchestrator.prompts import Prompt, conversation_prompts, read_prompt_context
from ax3l.orchestrator.proposers.base import (
    ConversationFailed,
    Proposer,
    ProposerDeps,
    TurnContext,
)
from ax3l.orchestrator.proposers.fallback import WithFallback
from ax3l.orchestrator.seat_process import SeatProcess
from ax3l.orchestrator.seat_server import SeatEndpoint, SeatReads, turn_payload
from ax3l.orchestrator.seat_turns import OpenTurn, TurnBoard
from ax3l.orchestrator.seats import SeatDirectory
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.reads import current_golden
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.shared.settings import OrchestratorSettings
from ax3l.shared.turn_state import turn_proposals

logger = logging.getLogger(__name__)


class NoSeatSubmitted(ConversationFailed):
    """No seat's submission was accepted for the turn before the deadline."""


class ExternalProposer(Proposer):
    """Offers each turn to the seats and waits for the first accepted submission."""

    name = "external"

    def __init__(self, deps: ProposerDeps, settings: OrchestratorSettings):
        super().__init__(deps)
        self.endpoint: SeatEndpoint | SeatProcess
        # The endpoint in its own process (a child, or a service at AX3L_SEATS_BOARD_SOCKET);
        # the board stays here.
        if settings.seats_process or settings.seats_board_socket:
            schema, index, db = deps.schema, deps.index, deps.db

            async def payload(turn: OpenTurn) -> dict[str, Any]:
                return await turn_payload(schema, index, turn)

            async def golden() -> GoldenConfigCreated | None:
                found = await current_golden(db)
                return found[1] if found is not None else None

            self.endpoint = SeatProcess(settings, payload, golden, log=deps.log)
            self.board: TurnBoard = self.endpoint.board
        else:
            self.board = TurnBoard()
            reads = SeatReads(deps.db, deps.schema, deps.index, SeatDirectory(deps.db))
            self.endpoint = SeatEndpoint(reads, deps.log, settings, self.board)
        self.deadline, self.poll = settings.external_deadline, settings.snakelab_poll_interval

    async def start(self) -> None:
        await self.endpoint.start()

    async def close(self) -> None:
        await self.endpoint.stop()

    async def _prompts(self, ctx: TurnContext) -> list[Prompt]:
        deps = self.deps
        prompt_ctx = await read_prompt_context(deps.db, deps.schema, ctx.turn.entry, ctx.golden)
        # Seats get the whole history: their context is not the local model's.
        return conversation_prompts(prompt_ctx)

    async def _answer(self, ctx: TurnContext) -> str | None:
        """The run id of the turn's accepted proposal, as the events say."""
        for proposal in await turn_proposals(self.deps.db, ctx.checkpoint_event_id):
            if proposal.model.run_id is not None:
                return proposal.model.run_id
        return None

    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        turn = OpenTurn(
            entry=ctx.turn.entry,
            index=ctx.turn.index,
            checkpoint_event_id=ctx.checkpoint_event_id,
            conversation_id=conversation_id,
            started_event_id=started_event_id,
            golden=ctx.golden,
            prompts=await self._prompts(ctx),
            deadline_seconds=self.deadline,
        )
        self.board.open(turn)
        deadline = time.monotonic() + self.deadline
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(turn.answered.wait(), min(self.poll, remaining))
                turn.answered.clear()
                run_id = await self._answer(ctx)
                if run_id is not None:
                    crash_point("after_tool_accepted")
                    return run_id
        finally:
            # Waits for a submission being forwarded right now, so its answer is seen below.
            await self.board.close(turn)
        run_id = await self._answer(ctx)
        if run_id is not None:
            return run_id
        raise NoSeatSubmitted(
            f"no seat's submission for {ctx.turn.entry.name} was accepted within"
            f" {self.deadline:g} s (AX3L_EXTERNAL_DEADLINE)"
        )


class ExternalWithFallback(WithFallback):
    """The seats first; a turn none of them answered by the deadline goes to ``fallback``.

    The deadline already waited, so the hand-over is in the same attempt, not after a streak
    of failed ones like the model's; any other failure of the seats' turn is the loop's.
    """

    def __init__(self, deps: ProposerDeps, seats: Proposer, fallback: Proposer, deadline: float):
        super().__init__(deps, seats, fallback)
        self.deadline = deadline  # AX3L_EXTERNAL_DEADLINE: what the hand-over says it waited

    async def propose(self, ctx: TurnContext, note: dict[str, Any] | None = None) -> str:
        try:
            return await self.primary.propose(ctx, note)
        except ConversationFailed as exc:
            if not isinstance(exc.__cause__, NoSeatSubmitted):
                raise
        waited = self.deadline
        logger.warning(
            "no seat answered %s within %g s: %s proposes this turn",
            ctx.turn.entry.name,
            waited,
            self.fallback.name,
        )
        return await self.hand_over(ctx, note, {"waited_seconds": waited})
