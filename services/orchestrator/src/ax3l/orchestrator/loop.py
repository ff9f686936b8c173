"""The round-robin experiment loop: each step is derived from the events, then done.

A step is the first of: seed (no golden yet), finish a pending seed rotation, finish the latest
accepted proposal (wait, compare, promote), under ``AX3L_GOLDEN=model`` let the golden follow the
model of every run (``model_golden``), rotate the seed when enough cycles stagnated, or take the
next turn (checkpoint, exhaustion skip, conversation). Because every step starts from
what the events say, startup recovery is just the first steps, and a restart anywhere resumes
exactly where the events leave off. A failed step is retried after an exponential backoff.
A full disk on the database server fails the step's write (its transaction rolled back), not
the loop: the step is retried with the same backoff, and the status says "disk full" until a
step goes through. An unexpected failure (a bug, an unforeseen reply) is retried the same way,
but the same one (its type, where it was raised) ``AX3L_UNEXPECTED_FAILURE_LIMIT`` times in a
row stops the loop with ``RepeatedFailure``, whose message names it: retrying cannot fix a bug.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    wait_exponential_jitter,
)

from ax3l.orchestrator.comparison import finish_proposal, pending_proposal
from ax3l.orchestrator.exhaustion import skip_if_exhausted
from ax3l.orchestrator.model_golden import follow_model, pending_follow
from ax3l.orchestrator.proposers import ConversationFailed, Proposer, TurnContext
from ax3l.orchestrator.proposers.base import TurnAhead
from ax3l.orchestrator.racing import Promotion
from ax3l.orchestrator.run_models import RunModels
from ax3l.orchestrator.seed_rotation import finish_rotation, pending_rotation, start_rotation
from ax3l.orchestrator.seeding import seed
from ax3l.orchestrator.services import Runs, StepFailed
from ax3l.orchestrator.settling import settle_submissions
from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.orchestrator.turns import ParameterOrderChanged, next_turn, write_checkpoint
from ax3l.shared.crash_points import crash_point
from ax3l.shared.cycles import CycleTracker
from ax3l.shared.db.errors import DatabaseError, DatabaseTimeout, DiskFull
from ax3l.shared.db.reads import current_golden
from ax3l.shared.metrics import LOOP_STEP_SECONDS, LOOP_STEPS
from ax3l.shared.settings import OrchestratorSettings
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.shared.submit_once import SubmissionRefused

logger = logging.getLogger(__name__)


class RepeatedFailure(RuntimeError):
    """The same unexpected failure ``AX3L_UNEXPECTED_FAILURE_LIMIT`` steps in a row."""


# These stop the loop: retrying cannot help and the user must act.
FATAL = (DatabaseError, ParameterOrderChanged, SubmissionRefused, RepeatedFailure)


@dataclass(eq=False)
class ExperimentLoop:
    """Runs steps forever; only fatal errors end it. Each step is handed what it uses."""

    settings: OrchestratorSettings
    runs: Runs
    snakelab: SnakeLabClient
    status: LoopStatus
    process_id: str
    proposer: Proposer
    steps: int = 0
    cycles: CycleTracker = field(default_factory=CycleTracker)
    _last_unexpected: str | None = None
    _unexpected: tuple[str, int] | None = None  # the last unexpected failure's place, its count

    async def run(self) -> None:
        """Step until cancelled or a fatal error."""
        while True:
            await self.step_with_backoff()

    async def step_with_backoff(self) -> None:
        """One step, retried with exponential backoff until it succeeds."""
        backoff_max = self.settings.retry_backoff_max
        initial = min(1.0, backoff_max)
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(StepFailed),
            wait=wait_exponential_jitter(multiplier=initial, max=backoff_max, jitter=initial),
            before_sleep=self._backing_off,
            reraise=True,
        )
        started = time.monotonic()
        async for attempt in retrying:
            with attempt:
                await self._guarded_step()
        self._last_unexpected = self._unexpected = None
        self.status.backoff_until = None
        self.status.disk_full = self.runs.db.disk_full.describe()
        self.steps += 1
        LOOP_STEPS.inc()
        LOOP_STEP_SECONDS.observe(time.monotonic() - started)

    def _backing_off(self, state: RetryCallState) -> None:
        seconds = state.next_action.sleep if state.next_action else 0.0
        self.status.set_phase(
            Phase.BACKING_OFF,
            backoff_until=time.time() + seconds,
            disk_full=self.runs.db.disk_full.describe(),
        )
        error = state.outcome.exception() if state.outcome else None
        logger.warning("step failed (%s); retrying in %.2f s", error, seconds)

    async def _guarded_step(self) -> None:
        try:
            await self.step()
        except (DatabaseTimeout, DiskFull, StepFailed, ConversationFailed) as exc:
            # A hung query or a write the full disk refused (caught before FATAL, whose
            # DatabaseError they are) fails the step, not the loop: it is derived again.
            self.status.error(str(exc))
            raise StepFailed(str(exc)) from exc
        except FATAL:
            raise
        except Exception as exc:
            # An unexpected failure (a bug or an unforeseen reply) must not end a months-long
            # experiment: it is logged (in full the first time) and the step is derived again
            # after a backoff.
            text = f"{type(exc).__name__}: {exc}"
            if text != self._last_unexpected:
                logger.exception("step failed unexpectedly")
            self._last_unexpected = text
            self.status.error(text)
            self._count_unexpected(exc, text)
            raise StepFailed(text) from exc

    def run_models(self) -> RunModels:
        """The model of every run, shared with the proposer (one fit serves both)."""
        return self.proposer.deps.models

    def _count_unexpected(self, exc: Exception, text: str) -> None:
        """Count ``exc`` with the unexpected failures before it of the same type raised at the
        same place (their messages may differ); ``RepeatedFailure`` at the limit."""
        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        place = f"{type(exc).__name__} at {where}"
        last = self._unexpected
        count = last[1] + 1 if last is not None and last[0] == place else 1
        self._unexpected = (place, count)
        limit = self.settings.unexpected_failure_limit
        if count >= limit:
            raise RepeatedFailure(
                f"the same unexpected failure {count} times in a row ({place}): {text}; retrying"
                f" cannot fix it (AX3L_UNEXPECTED_FAILURE_LIMIT={limit}): fix its cause (the"
                " log has its traceback), then start the orchestrator again, which continues"
                " where the events say"
            ) from exc

    def _prepare(self, index: object, include_current: bool = False) -> None:
        """Start the MCP sessions of the turns after round-robin ``index`` (and its own), so
        they are ready when their conversations begin; others prepared earlier are closed."""
        if type(index) is int:
            pool = self.proposer.deps.sessions
            # A pipelined conversation holds its own session already.
            held = self.proposer.held_entry()
            pool.prepare([e for e in pool.upcoming(index, include_current) if e.name != held])

    async def step(self) -> None:
        """Derive the next piece of work from the events and do it."""
        runs, status, settings, db = self.runs, self.status, self.settings, self.runs.db
        promotion = Promotion(
            settings.promotion, settings.confirm_seeds, settings.race_max_seeds, settings.race_alpha
        )
        golden_event = await current_golden(db)
        if golden_event is None:
            await seed(runs, status, promotion)
            return
        # A run whose submission went unanswered belongs to the turn it was proposed for.
        await settle_submissions(
            runs, self.snakelab, status, settings.snakelab_timeout, settings.submit_settle_wait
        )
        golden_event_id, golden = golden_event
        status.seed, status.golden_run_id = golden.seed, golden.run_id
        status.golden_high_score = golden.high_score
        cycles = await self.cycles.refresh(db)
        status.cycles, status.stagnant_cycles = cycles.complete, cycles.stagnant

        rotation = await pending_rotation(db, golden_event_id)
        if rotation is not None:
            self._prepare((await next_turn(db)).index, include_current=True)
            await finish_rotation(runs, status, promotion, self.process_id, rotation)
            return
        pending = await pending_proposal(db)
        if pending is not None:
            if pending.checkpoint is not None:
                self._prepare(pending.checkpoint.model.index)
            if settings.pipeline and pending.compared is None:
                # The next turn's conversation takes the session just prepared for it.
                await self.proposer.speculate(
                    TurnAhead(
                        turn=await next_turn(db),
                        golden_event_id=golden_event_id,
                        golden=golden,
                        loop_process_id=self.process_id,
                        while_run_id=pending.run_id,
                    )
                )
            await finish_proposal(runs, status, promotion, pending)
            return
        if settings.golden == "model" and (decision := await pending_follow(db)) is not None:
            await follow_model(
                db,
                runs.log,
                self.run_models(),
                status,
                decision,
                golden,
                settings.model_lower_bound,
            )
            return
        if cycles.stagnant >= settings.seed_stagnant_rounds:
            self._prepare((await next_turn(db)).index, include_current=True)
            rotation = await start_rotation(
                runs, status, self.process_id, golden_event_id, golden, cycles.stagnant
            )
            await finish_rotation(runs, status, promotion, self.process_id, rotation)
            return

        turn = await next_turn(db)
        status.set_phase(Phase.CHOOSING, parameter=turn.parameter, index=turn.index, run_id=None)
        checkpoint_id = await write_checkpoint(runs.log, turn, self.process_id)
        crash_point("after_checkpoint")
        if await skip_if_exhausted(
            runs.index, runs.log, self.process_id, turn, golden, checkpoint_id
        ):
            # Nothing is started here: the next step follows at once and may skip as well, and
            # a session started for a skipped turn would only be closed again.
            return
        self._prepare(turn.index, include_current=True)
        status.set_phase(Phase.CONVERSING)
        await self.proposer.propose(
            TurnContext(
                turn=turn,
                checkpoint_event_id=checkpoint_id,
                golden_event_id=golden_event_id,
                golden=golden,
                loop_process_id=self.process_id,
            )
        )
