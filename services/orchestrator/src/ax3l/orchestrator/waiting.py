"""Waiting for a SnakeLab run: poll ``simulation.status`` until the run ends, logging each stage.

SnakeLab only knows the runs of its current process: after a SnakeLab restart the answer is
``run_not_found`` and the run's status is read from SnakeLab's tables instead. A run that
neither knows is vanished. Every stage is logged once per run, so a restart mid-wait neither
repeats nor skips one.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ax3l.orchestrator.crash_points import crash_point
from ax3l.orchestrator.event_reads import latest
from ax3l.orchestrator.status import LoopStatus
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.db.reads import run_with_config
from ax3l.shared.snakelab_client import (
    SnakeLabClient,
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
)
from ax3l.shared.wire import TERMINAL_STATES

logger = logging.getLogger(__name__)

TERMINAL_EVENTS = {
    "completed": "simulation_completed",
    "failed": "simulation_failed",
    "cancelled": "simulation_cancelled",
    "vanished": "simulation_failed",
}
STARTED_STATES = frozenset({"running", "paused", "cancelling"})
# run_not_found with no row in SnakeLab's tables this many polls in a row: the run is gone.
VANISHED_AFTER = 2


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: ``completed``, ``failed``, ``cancelled`` or ``vanished``."""

    run_id: str
    state: str
    high_score: int | None
    error: str | None
    config: dict[str, Any] | None
    event_id: int

    @property
    def scored(self) -> bool:
        return self.state == "completed" and self.high_score is not None


class RunWaiter:
    """Polls one run at a time to its end."""

    def __init__(
        self,
        db: Database,
        log: EventLog,
        client: SnakeLabClient,
        schema: ConfigSchema,
        interval: float,
        status: LoopStatus,
    ):
        self.db = db
        self.log = log
        self.client = client
        self.schema = schema
        self.interval = interval
        self.status = status

    async def wait(
        self, run_id: str, parent_event_id: int | None, crash_at: str | None = None
    ) -> RunOutcome:
        """Wait until ``run_id`` ends and return how; safe to call again after a restart."""
        ended = await latest(self.db, sorted(set(TERMINAL_EVENTS.values())), process_id=run_id)
        if ended is not None:
            row = await run_with_config(self.db, self.schema, run_id)
            return RunOutcome(
                run_id,
                str(ended.field("state", "failed")),
                ended.field("high_score"),
                ended.field("error"),
                None if row is None else row["config"],
                ended.event_id,
            )
        started = await latest(self.db, "simulation_started", process_id=run_id) is not None
        missing = 0
        first = True
        while True:
            if not first:
                await asyncio.sleep(self.interval)
            first = False
            state, error = await self._state(run_id)
            if crash_at:
                crash_point(crash_at)
            if state is None:
                continue
            if state == "missing":
                missing += 1
                if missing < VANISHED_AFTER:
                    continue
                state = "vanished"
            else:
                missing = 0
            row = (
                None if state == "vanished" else await run_with_config(self.db, self.schema, run_id)
            )
            if (
                state in TERMINAL_STATES
                and row is not None
                and row["status"] not in TERMINAL_STATES
            ):
                continue  # the reply raced ahead of SnakeLab's commit: read again next poll
            if not started and state != "vanished" and state != "queued":
                if state in STARTED_STATES or (row is not None and row.get("started_at")):
                    await self.log.log(
                        "simulation_started",
                        {"run_id": run_id, "state": state},
                        process_id=run_id,
                        parent_event_id=parent_event_id,
                    )
                    started = True
            if state in TERMINAL_STATES or state == "vanished":
                return await self._finish(run_id, state, error, row, parent_event_id)

    async def _state(self, run_id: str) -> tuple[str | None, str | None]:
        """SnakeLab's state of the run, ``missing`` when nobody knows it, None when unknown now."""
        try:
            reply = await self.client.status(run_id)
            return reply.state, reply.error
        except SnakeLabError as exc:
            if exc.code != "run_not_found":
                self.status.error(f"waiting for run {run_id}: {exc}")
                return None, None
        except (SnakeLabUnavailable, SnakeLabProtocolError) as exc:
            self.status.error(f"waiting for run {run_id}: {exc}")
            logger.warning("waiting for run %s: %s", run_id, exc)
            return None, None
        row = await run_with_config(self.db, self.schema, run_id)
        if row is None:
            return "missing", None
        if row["status"] not in TERMINAL_STATES:
            # SnakeLab restarted and has not marked its lost runs failed yet: ask again.
            return None, None
        return str(row["status"]), row.get("error_message")

    async def _finish(
        self,
        run_id: str,
        state: str,
        error: str | None,
        row: dict[str, Any] | None,
        parent_event_id: int | None,
    ) -> RunOutcome:
        high_score = None if row is None or row["high_score"] is None else int(row["high_score"])
        if row is not None and row.get("error_message"):
            error = str(row["error_message"])
        if state == "vanished":
            error = "the run is known neither to SnakeLab nor to its database"
        content = {
            "run_id": run_id,
            "state": state,
            "high_score": high_score,
            "episode_count": None if row is None else row.get("episode_count"),
            "error": error,
        }
        event_id = await self.log.log(
            TERMINAL_EVENTS[state], content, process_id=run_id, parent_event_id=parent_event_id
        )
        logger.info("run %s ended: %s, high score %s", run_id, state, high_score)
        return RunOutcome(
            run_id, state, high_score, error, None if row is None else row["config"], event_id
        )
