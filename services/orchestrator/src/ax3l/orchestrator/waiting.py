"""Waiting for a SnakeLab run: poll ``simulation.status`` until the run ends, logging each stage.

SnakeLab only knows the runs of its current process: after a SnakeLab restart the answer is
``run_not_found`` and the run's status is read from SnakeLab's tables instead. A run that
neither knows is vanished. Every stage is logged once per run, so a restart mid-wait neither
repeats nor skips one.

A run that is not terminal ``deadline`` seconds after its recorded submission (a run whose end
SnakeLab could not store stays ``running`` in its table for ever) is logged as failed, with
``timed_out`` in the event, and SnakeLab is asked, best effort, to cancel it. The clock starts
at the ``simulation_submitted`` event, so a restart does not reset it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ax3l.orchestrator.attempts import never_trained
from ax3l.orchestrator.status import LoopStatus
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.db.event_reads import latest, select
from ax3l.shared.db.intents import now
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import (
    RunEnded,
    SimulationCancelled,
    SimulationCompleted,
    SimulationFailed,
    SimulationStarted,
    SimulationSubmitted,
)
from ax3l.shared.snakelab_client import (
    SnakeLabClient,
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
)
from ax3l.shared.wire import TERMINAL_STATES

logger = logging.getLogger(__name__)

TERMINAL_MODELS: dict[str, type[RunEnded]] = {
    "completed": SimulationCompleted,
    "failed": SimulationFailed,
    "cancelled": SimulationCancelled,
    "vanished": SimulationFailed,
}
TERMINAL_EVENTS = {state: model.event for state, model in TERMINAL_MODELS.items()}
ENDED_EVENTS = sorted(set(TERMINAL_EVENTS.values()))


async def ended_unscored(db: Database, run_id: str | None) -> bool:
    """Whether the run's logged end has no score (it failed, or completed without one)."""
    ended = await latest(db, ENDED_EVENTS, process_id=run_id)
    if ended is None:
        return False
    end: RunEnded = ended.model
    return end.state != "completed" or end.high_score is None


STARTED_STATES = frozenset({"running", "paused", "cancelling"})
# run_not_found with no row in SnakeLab's tables this many polls in a row: the run is gone.
VANISHED_AFTER = 2
# Seconds before the second look at a run; each later wait doubles, up to AX3L_POLL_INTERVAL.
FIRST_POLL = 0.01


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: ``completed``, ``failed``, ``cancelled`` or ``vanished``."""

    run_id: str
    state: str
    high_score: int | None
    error: str | None
    config: dict[str, Any] | None
    event_id: int
    episode_count: int | None = None

    @property
    def scored(self) -> bool:
        return self.state == "completed" and self.high_score is not None

    @property
    def never_trained(self) -> bool:
        """SnakeLab failed or lost the run before its first episode: nothing was tested."""
        return never_trained(self.state, self.high_score, self.episode_count)


@dataclass
class _Progress:
    """What one wait has seen so far."""

    started: bool
    missing: int = 0  # run_not_found with no row, polls in a row
    state: str | None = None  # the last state SnakeLab or its tables gave


@dataclass(eq=False)
class RunWaiter:
    """Polls one run at a time to its end."""

    db: Database
    log: EventLog
    client: SnakeLabClient
    schema: ConfigSchema
    interval: float
    status: LoopStatus
    deadline: float | None = None  # AX3L_RUN_DEADLINE_SECONDS

    async def _run(self, run_id: str) -> dict[str, Any] | None:
        return await SnakeLabRuns(self.db).with_config(self.schema, run_id)

    async def wait(
        self, run_id: str, parent_event_id: int | None, crash_at: str | None = None
    ) -> RunOutcome:
        """Wait until ``run_id`` ends (or ``deadline`` seconds after its submission passed) and
        return how; safe to call again after a restart."""
        ended = await latest(self.db, ENDED_EVENTS, process_id=run_id)
        if ended is not None:
            end: RunEnded = ended.model
            row = await self._run(run_id)
            return RunOutcome(
                run_id,
                str(end.get("state", "failed")),
                end.high_score,
                end.error,
                None if row is None else row["config"],
                ended.event_id,
                end.episode_count,
            )
        progress = _Progress(
            started=await latest(self.db, SimulationStarted, process_id=run_id) is not None
        )
        submitted_at = await self._submitted_at(run_id) if self.deadline is not None else None
        polls = 0
        while True:
            if polls:
                await asyncio.sleep(self._delay(polls, progress))
            polls += 1
            # Measured before the poll: a run that ended while nobody watched is still read.
            overdue = self.deadline is not None and _elapsed(submitted_at) > self.deadline
            outcome = await self._poll(run_id, parent_event_id, progress, crash_at)
            if outcome is not None:
                return outcome
            if overdue:
                assert self.deadline is not None
                return await self._time_out(run_id, self.deadline, progress.state, parent_event_id)

    def _delay(self, polls: int, progress: _Progress) -> float:
        """Seconds before the next look: ``FIRST_POLL`` doubling up to the interval, so a short
        run's end is seen within milliseconds and a long run is polled at the interval; the
        full interval while SnakeLab does not know the run (``VANISHED_AFTER`` counts those)."""
        if progress.missing:
            return self.interval
        return min(self.interval, FIRST_POLL * 2.0 ** min(polls - 1, 30))

    async def _poll(
        self,
        run_id: str,
        parent_event_id: int | None,
        progress: _Progress,
        crash_at: str | None,
    ) -> RunOutcome | None:
        """One look at the run: its outcome once it ended, else None."""
        state, error = await self._state(run_id)
        progress.state = state or progress.state
        if crash_at:
            crash_point(crash_at)
        if state is None:
            return None
        if state == "missing":
            progress.missing += 1
            if progress.missing < VANISHED_AFTER:
                return None
            state = "vanished"
        else:
            progress.missing = 0
        row = None if state == "vanished" else await self._run(run_id)
        if state in TERMINAL_STATES and row is not None and row["status"] not in TERMINAL_STATES:
            return None  # the reply raced ahead of SnakeLab's commit: read again next poll
        if (
            not progress.started
            and state not in ("vanished", "queued")
            and (state in STARTED_STATES or (row is not None and row.get("started_at")))
        ):
            await self.log.log(
                SimulationStarted(run_id=run_id, state=state),
                process_id=run_id,
                parent_event_id=parent_event_id,
            )
            progress.started = True
        if state in TERMINAL_STATES or state == "vanished":
            return await self._finish(run_id, state, error, row, parent_event_id)
        return None

    async def _submitted_at(self, run_id: str) -> datetime:
        """When the run's submission was recorded (now, for a run recorded nowhere)."""
        first = await select(self.db, SimulationSubmitted, process_id=run_id, oldest=1)
        at = first[0].occurred_at if first else None
        return at if isinstance(at, datetime) else now()

    async def _time_out(
        self, run_id: str, deadline: float, last_state: str | None, parent_event_id: int | None
    ) -> RunOutcome:
        error = (
            f"the run was not terminal {deadline:.0f} s after its submission"
            f" (last state: {last_state or 'unknown'}); treated as failed"
        )
        logger.error("run %s: %s", run_id, error)
        self.status.error(f"run {run_id}: {error}")
        try:
            await self.client.cancel(run_id)
        except (SnakeLabError, SnakeLabUnavailable, SnakeLabProtocolError) as exc:
            logger.info("run %s: cancelling after the deadline: %s", run_id, exc)
        row = await self._run(run_id)
        return await self._finish(run_id, "failed", error, row, parent_event_id, timed_out=True)

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
        row = await self._run(run_id)
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
        timed_out: bool = False,
    ) -> RunOutcome:
        high_score = None if row is None or row["high_score"] is None else int(row["high_score"])
        if row is not None and row.get("error_message") and not timed_out:
            error = str(row["error_message"])
        if state == "vanished":
            error = "the run is known neither to SnakeLab nor to its database"
        episode_count = None if row is None else row.get("episode_count")
        marks: dict[str, Any] = {}
        if timed_out:
            marks["timed_out"] = True
        if never_trained(state, high_score, episode_count):
            marks["never_trained"] = True
        content = TERMINAL_MODELS[state](
            run_id=run_id,
            state=state,
            high_score=high_score,
            episode_count=episode_count,
            error=error,
            **marks,
        )
        event_id = await self.log.log(content, process_id=run_id, parent_event_id=parent_event_id)
        logger.info("run %s ended: %s, high score %s", run_id, state, high_score)
        return RunOutcome(
            run_id,
            state,
            high_score,
            error,
            None if row is None else row["config"],
            event_id,
            None if episode_count is None else int(episode_count),
        )


def _elapsed(since: datetime | None) -> float:
    return 0.0 if since is None else (now() - since).total_seconds()
