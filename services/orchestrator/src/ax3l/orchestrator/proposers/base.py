"""What every proposer shares: the turn it serves, the conversation's start and end events."""

from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ax3l.orchestrator.mcp_session import BoundSession, ToolSessionFailed
from ax3l.orchestrator.raw_capture import RawCapture
from ax3l.orchestrator.session_pool import SessionPool
from ax3l.orchestrator.status import LoopStatus
from ax3l.orchestrator.turns import Turn
from ax3l.shared.config_index import ConfigIndex
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.db.reads import GoldenRecord
from ax3l.shared.settings import Settings

logger = logging.getLogger(__name__)


class ConversationFailed(RuntimeError):
    """The turn produced no accepted proposal; the same entry is retried after a backoff."""


@dataclass(frozen=True)
class ProposerDeps:
    """The services a proposer works with."""

    db: Database
    log: EventLog
    schema: ConfigSchema
    settings: Settings
    status: LoopStatus
    capture: RawCapture
    index: ConfigIndex
    sessions: SessionPool


@dataclass(frozen=True)
class TurnContext:
    """The turn a proposal is wanted for."""

    turn: Turn
    checkpoint_event_id: int
    golden_event_id: int
    golden: GoldenRecord
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
        deps = self.deps
        conversation_id = str(uuid.uuid4())
        entry = ctx.turn.entry
        deps.status.conversation_id = conversation_id
        started = await deps.log.log(
            "conversation_started",
            {
                "proposer": self.name,
                "parameter": entry.name,
                "index": ctx.turn.index,
                "loop_process_id": ctx.loop_process_id,
                "checkpoint_event_id": ctx.checkpoint_event_id,
                "golden_run_id": ctx.golden.run_id,
                "seed": ctx.golden.seed,
                **(note or {}),
            },
            process_id=conversation_id,
            parent_event_id=ctx.checkpoint_event_id,
            parameter=entry.name,
            source_name=self.name,
        )
        ended: dict[str, Any] = {"proposer": self.name, "parameter": entry.name}
        self.sessions = []
        try:
            run_id = await self.converse(ctx, conversation_id, started)
        except (ConversationFailed, ToolSessionFailed) as exc:
            message = str(exc)
            await deps.log.log(
                "conversation_ended",
                {**ended, "outcome": "failed", "error": message},
                level="ERROR",
                process_id=conversation_id,
                parent_event_id=started,
                parameter=entry.name,
                source_name=self.name,
            )
            deps.status.error(f"{entry.name}: {message}")
            logger.error("conversation %s (%s) failed: %s", conversation_id, entry.name, message)
            raise ConversationFailed(message) from exc
        finally:
            deps.status.conversation_id = None
        timings = [_timing(s) for s in self.sessions]
        await deps.log.log(
            "conversation_ended",
            {**ended, "outcome": "accepted", "run_id": run_id, "mcp_sessions": timings},
            process_id=conversation_id,
            parent_event_id=started,
            parameter=entry.name,
            source_name=self.name,
        )
        logger.info("%s proposed run %s for %s", self.name, run_id, entry.name)
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
