"""Pipelined proposals (``AX3L_PIPELINE=on``): the next turn's conversation runs while a run trains.

SnakeLab's time is the scarce resource, and a small local model takes tens of seconds per reply.
With pipelining on, while run k trains the loop hands the model proposer the turn that comes
next (``TurnAhead``): its conversation starts at once, against the golden as it is and a history
that lacks run k (the reason it is off by default). The model's first tool call is *held*: it
is executed through the conversation's MCP session only when the loop opens that turn, that is
after run k was compared, the turn's ``round_robin_checkpoint`` written and its exhaustion
checked. The broker then builds the candidate from the golden of that moment and enforces the
turn as for any call; a value that has become a duplicate goes back to the model as the usual
correction.

Nothing of this is state to recover: a restart, a seed rotation, an exhaustion skip or a turn
other than the one predicted discards the held conversation (``conversation_ended`` with
``outcome: discarded``), and the turn is asked again as if pipelining were off. The event log
shows a pipelined conversation by ``pipelined: true`` and ``while_run_id`` on its
``conversation_started`` (which has no checkpoint yet) and by ``conversation_resumed`` (the
checkpoint it was handed to, how long its call was held); the status API by ``pipelined``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ax3l.orchestrator.mcp_session import BoundSession
from ax3l.orchestrator.proposers.base import Proposer, TurnAhead, TurnContext
from ax3l.shared.event_models import ConversationEnded, ConversationResumed

logger = logging.getLogger(__name__)

# What a pipelined conversation calls before its first tool call: it waits for the turn to
# open and gets the turn's context and the seconds it waited.
Gate = Callable[[], Awaitable[tuple[TurnContext, float]]]
# The proposer's conversation, given the preview of the turn, its ids, the gate and the list
# its MCP sessions are noted in.
Converse = Callable[[TurnContext, str, int, Gate, list[BoundSession]], Awaitable[str]]


@dataclass
class _Held:
    ahead: TurnAhead
    conversation_id: str
    started: int
    release: asyncio.Future[TurnContext]
    sessions: list[BoundSession]
    task: asyncio.Task[str] | None = None
    held_at: float | None = None
    began: float = field(default_factory=time.monotonic)

    def serves(self, ctx: TurnContext) -> bool:
        """Whether ``ctx`` is the turn this conversation was started for, on the same seed."""
        return (
            ctx.turn.index == self.ahead.turn.index
            and ctx.turn.entry.name == self.ahead.turn.entry.name
            and ctx.golden.seed == self.ahead.golden.seed
        )


class Pipeline:
    """At most one pipelined conversation of ``proposer``, from its start to its turn."""

    def __init__(self, proposer: Proposer, converse: Converse):
        self.proposer = proposer
        self.deps = proposer.deps
        self._converse = converse
        self._held: _Held | None = None

    @property
    def entry(self) -> str | None:
        return self._held.ahead.turn.entry.name if self._held is not None else None

    async def start(self, ahead: TurnAhead, note: dict[str, Any] | None = None) -> None:
        """Start the conversation for ``ahead`` unless one for that turn already runs."""
        held = self._held
        if held is not None:
            if (
                held.ahead.turn.index == ahead.turn.index
                and held.ahead.golden.seed == ahead.golden.seed
            ):
                return
            await self.discard("another turn comes next")
        conversation_id = str(uuid.uuid4())
        started = await self.proposer.log_started(
            ahead.turn,
            conversation_id,
            {
                "loop_process_id": ahead.loop_process_id,
                "checkpoint_event_id": None,
                "golden_run_id": ahead.golden.run_id,
                "seed": ahead.golden.seed,
                "pipelined": True,
                "while_run_id": ahead.while_run_id,
                **(note or {}),
            },
            parent=None,
        )
        held = _Held(
            ahead,
            conversation_id,
            started,
            asyncio.get_running_loop().create_future(),
            [],
        )
        preview = TurnContext(
            turn=ahead.turn,
            checkpoint_event_id=0,  # none yet; the conversation does not use it
            golden_event_id=ahead.golden_event_id,
            golden=ahead.golden,
            loop_process_id=ahead.loop_process_id,
        )

        async def gate() -> tuple[TurnContext, float]:
            held.held_at = time.monotonic()
            self._show(held, "held")
            ctx = await held.release
            return ctx, time.monotonic() - held.held_at

        held.task = asyncio.create_task(
            self.proposer.conclude(
                ahead.turn.entry.name,
                conversation_id,
                started,
                self._converse(preview, conversation_id, started, gate, held.sessions),
                extra={"pipelined": True},
                sessions=held.sessions,
            ),
            name=f"pipelined-{ahead.turn.entry.name}",
        )
        self._held = held
        self._show(held, "conversing")
        logger.info(
            "pipelined: asking for %s while run %s trains",
            ahead.turn.entry.name,
            ahead.while_run_id,
        )

    def _show(self, held: _Held, state: str) -> None:
        self.deps.status.pipelined = {
            "conversation_id": held.conversation_id,
            "parameter": held.ahead.turn.entry.name,
            "index": held.ahead.turn.index,
            "while_run_id": held.ahead.while_run_id,
            "state": state,
            "since": time.time(),
        }

    def take(self, ctx: TurnContext) -> _Held | None:
        """The pipelined conversation for ``ctx``'s turn, handed over (None if there is none
        or it was for another turn; that one is then left to ``discard``)."""
        held = self._held
        if held is None or not held.serves(ctx):
            return None
        self._held = None
        return held

    async def resume(self, held: _Held, ctx: TurnContext) -> str:
        """Hand the held conversation its turn and see it to the end; the accepted run id."""
        deps = self.deps
        assert held.task is not None
        if held.task.done():
            return await held.task  # it failed before its turn came and said so
        waited = None if held.held_at is None else time.monotonic() - held.held_at
        await deps.log.log(
            ConversationResumed(
                proposer=self.proposer.name,
                parameter=ctx.turn.entry.name,
                index=ctx.turn.index,
                checkpoint_event_id=ctx.checkpoint_event_id,
                golden_run_id=ctx.golden.run_id,
                seed=ctx.golden.seed,
                while_run_id=held.ahead.while_run_id,
                call_held=held.held_at is not None,
                held_seconds=None if waited is None else round(waited, 3),
                ahead_seconds=round(time.monotonic() - held.began, 3),
            ),
            process_id=held.conversation_id,
            parent_event_id=ctx.checkpoint_event_id,
            parameter=ctx.turn.entry.name,
            source_name=self.proposer.name,
        )
        deps.status.pipelined = None
        deps.status.conversation_id = held.conversation_id
        if not held.release.done():
            held.release.set_result(ctx)
        try:
            return await held.task
        finally:
            deps.status.conversation_id = None

    async def discard(self, reason: str) -> None:
        """Stop the pipelined conversation, if any, and say why in the event log."""
        held, self._held = self._held, None
        if held is None or held.task is None:
            return
        self.deps.status.pipelined = None
        held.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await held.task
        if not held.task.cancelled():
            return  # it had ended by itself and said so (a failed conversation)
        logger.info(
            "pipelined conversation for %s discarded: %s", held.ahead.turn.entry.name, reason
        )
        await self.deps.log.log(
            ConversationEnded(
                proposer=self.proposer.name,
                parameter=held.ahead.turn.entry.name,
                outcome="discarded",
                reason=reason,
                pipelined=True,
                wasted=self.proposer.wasted(held.conversation_id) or None,
            ),
            level="WARNING",
            process_id=held.conversation_id,
            parent_event_id=held.started,
            parameter=held.ahead.turn.entry.name,
            source_name=self.proposer.name,
        )
