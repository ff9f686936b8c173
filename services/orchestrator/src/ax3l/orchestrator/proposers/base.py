"""What every proposer shares: the turn it serves, the conversation's start and end events."""

from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from ax3l.orchestrator.mcp_session import BoundSession, ToolSessionFailed
from ax3l.orchestrator.raw_capture import RawCapture
from ax3l.orchestrator.run_models import RunModels
from ax3l.orchestrator.session_pool import SessionPool
from ax3l.orchestrator.status import LoopStatus
from ax3l.orchestrator.turns import Turn
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import ConversationEnded, ConversationStarted, GoldenConfigCreated

logger = logging.getLogger(__name__)


class ConversationFailed(RuntimeError):
    """The turn produced no accepted proposal; the same entry is retried after a backoff."""


@dataclass(frozen=True)
class ProposerDeps:
    """What the proposers share; each one's settings' values are its constructor's own."""

    db: Database
    log: EventLog
    schema: ConfigSchema
    status: LoopStatus
    capture: RawCapture
    index: ConfigIndex
    sessions: SessionPool
    models: RunModels  # the model of every run (the model proposer, AX3L_GOLDEN=model)


@dataclass(frozen=True)
class TurnAhead:
    """The turn after the one whose run ``while_run_id`` trains, as it looks now."""

    turn: Turn
    golden_event_id: int
    golden: GoldenConfigCreated
    loop_process_id: str
    while_run_id: str


@dataclass(frozen=True)
class TurnContext:
    """The turn a proposal is wanted for."""

    turn: Turn
    checkpoint_event_id: int
    golden_event_id: int
    golden: GoldenConfigCreated
    loop_process_id: str


class Proposer(ABC):
    """Turns a turn into an accepted proposal (a SnakeLab run id) or ConversationFailed."""

    name: str = ""

    def __init__(self, deps: ProposerDeps):
        self.deps = deps
        # The MCP sessions of the current conversation, for the timings in conversation_ended.
        self.sessions: list[BoundSession] = []

    async def start(self) -> None:  # noqa: B027 - most proposers serve nothing
        """Open what the proposer serves before the loop runs (the seats' endpoint)."""

    async def close(self) -> None:  # noqa: B027 - most proposers hold nothing
        """Release what the proposer holds (HTTP clients)."""

    async def propose(self, ctx: TurnContext, note: dict[str, Any] | None = None) -> str:
        """Run one conversation for ``ctx``; returns the accepted run id.

        ``note`` is added to ``conversation_started`` (a fallback says whom it stands in for).
        """
        conversation_id = str(uuid.uuid4())
        self.deps.status.conversation_id = conversation_id
        try:
            started = await self.log_started(
                ctx.turn,
                conversation_id,
                {
                    "loop_process_id": ctx.loop_process_id,
                    "checkpoint_event_id": ctx.checkpoint_event_id,
                    "golden_run_id": ctx.golden.run_id,
                    "seed": ctx.golden.seed,
                    **(note or {}),
                },
                parent=ctx.checkpoint_event_id,
            )
            self.sessions = []
            return await self.conclude(
                ctx.turn.entry.name,
                conversation_id,
                started,
                self.converse(ctx, conversation_id, started),
            )
        finally:
            self.deps.status.conversation_id = None

    async def speculate(  # noqa: B027 - most proposers never pipeline
        self, ahead: TurnAhead, note: dict[str, Any] | None = None
    ) -> None:
        """Start the conversation for the turn after the one whose run trains (AX3L_PIPELINE);
        ``propose`` for that turn then continues it. Proposers that answer at once ignore it."""

    def explanation(self) -> dict[str, Any]:
        """What ``conversation_ended`` says of how the accepted proposal was chosen (the model
        proposer's figures); nothing by default."""
        return {}

    def wasted(self, conversation_id: str) -> dict[str, int]:
        """The conversation's wasted asks by kind (``ax3l.shared.wasted``), for its
        ``conversation_ended`` whatever its outcome; none by default."""
        return {}

    def held_entry(self) -> str | None:
        """The entry of a pipelined conversation not yet handed to its turn, if any."""
        return None

    async def log_started(
        self, turn: Turn, conversation_id: str, fields: dict[str, Any], parent: int | None
    ) -> int:
        """``conversation_started`` for ``turn`` with ``fields``; its event id."""
        entry = turn.entry
        return await self.deps.log.log(
            ConversationStarted(
                proposer=self.name, parameter=entry.name, index=turn.index, **fields
            ),
            process_id=conversation_id,
            parent_event_id=parent,
            parameter=entry.name,
            source_name=self.name,
        )

    async def conclude(
        self,
        parameter: str,
        conversation_id: str,
        started: int,
        conversation: Awaitable[str],
        extra: dict[str, Any] | None = None,
        sessions: list[BoundSession] | None = None,
    ) -> str:
        """Await ``conversation`` and log ``conversation_ended`` (accepted or failed, with
        ``extra`` and the timings of ``sessions``, by default the proposer's own); returns the
        run id or raises ConversationFailed."""
        deps = self.deps
        ended: dict[str, Any] = {"proposer": self.name, "parameter": parameter, **(extra or {})}
        try:
            run_id = await conversation
        except (ConversationFailed, ToolSessionFailed) as exc:
            message = str(exc)
            if wasted := self.wasted(conversation_id):
                ended["wasted"] = wasted
            await deps.log.log(
                ConversationEnded(**ended, outcome="failed", error=message),
                level="ERROR",
                process_id=conversation_id,
                parent_event_id=started,
                parameter=parameter,
                source_name=self.name,
            )
            deps.status.error(f"{parameter}: {message}")
            logger.error("conversation %s (%s) failed: %s", conversation_id, parameter, message)
            raise ConversationFailed(message) from exc
        timings = [_timing(s) for s in (self.sessions if sessions is None else sessions)]
        ended |= self.explanation()
        if wasted := self.wasted(conversation_id):
            ended["wasted"] = wasted
        await deps.log.log(
            ConversationEnded(**ended, outcome="accepted", run_id=run_id, mcp_sessions=timings),
            process_id=conversation_id,
            parent_event_id=started,
            parameter=parameter,
            source_name=self.name,
        )
        logger.info("%s proposed run %s for %s", self.name, run_id, parameter)
        return run_id

    @abstractmethod
    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        """The proposer's own conversation; returns the accepted run id."""


def _timing(session: BoundSession) -> dict[str, Any]:
    """A session's timings for ``conversation_ended``: its spawn (in advance when
    ``prepared``), how long the conversation waited for it, and its close once it is known
    (a session closes in the background after its conversation)."""
    timing: dict[str, Any] = {
        "spawn_seconds": round(session.spawn_seconds, 4),
        "prepared": session.prepared,
        "wait_seconds": round(session.wait_seconds or 0.0, 4),
    }
    if session.close_seconds is not None:
        timing["close_seconds"] = round(session.close_seconds, 4)
    return timing
