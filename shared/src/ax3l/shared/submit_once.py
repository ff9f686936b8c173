"""Exactly once across crashes and lost answers: the one way Ax3l sends ``simulation.submit``.

SnakeLab runs every valid submit it receives, so no submit is ever resent blindly. Both
submitters build on the same two pieces:

* ``send_once``: one ``simulation.submit``, whose outcome is ``Sent`` (SnakeLab's reply),
  ``Refused`` (SnakeLab answered with an error, so no run was created) or ``Unknown`` (no
  usable answer: SnakeLab may or may not have created the run).
* ``created_runs``: the stored runs of a configuration that are newer than a position of the
  configuration index noted before the send (``ConfigIndex.position``). That is where the run
  of an ``Unknown`` send, or of a send the process died right after, is found.

Who uses them:

* The broker, for proposals (``toolbroker/submission.py``): a durable intent records the
  position before ``send_once``; ``ax3l.shared.db.intents.reconcile`` adopts the intent's run from
  ``created_runs`` after a crash or an ``Unknown``, and never sends again.
* ``OnceSubmitter``, for runs of deterministic configurations (the orchestrator's seeding,
  seed baselines and infrastructure retries; ``ax3l-compare``'s held-out re-tests): a stored
  usable run of the configuration is reused instead of sending (one that has not failed, been
  cancelled or completed without a high score); after an ``Unknown`` it waits until SnakeLab
  answers and takes the run from ``created_runs`` before anything is sent again. Only when every
  stored run of the configuration is unusable is it submitted anew (the callers bound how
  often).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from pydantic import ValidationError

from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.config_index import ConfigIndex, IndexedRun
from ax3l.shared.db.database import Database
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.snakelab_client import (
    SnakeLabClient,
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
)
from ax3l.shared.wire import SubmitReply

logger = logging.getLogger(__name__)

UNUSABLE_STATES = ("failed", "cancelled")


@dataclass(frozen=True)
class Sent:
    """SnakeLab accepted the configuration and created ``reply.run_id``."""

    reply: SubmitReply


@dataclass(frozen=True)
class Refused:
    """SnakeLab answered with an error: no run was created."""

    error: SnakeLabError


@dataclass(frozen=True)
class Unknown:
    """No usable answer (timeout, connection, malformed reply): the run may exist."""

    problem: str


SendOutcome: TypeAlias = Sent | Refused | Unknown


async def send_once(client: SnakeLabClient, config: dict[str, Any]) -> SendOutcome:
    """One ``simulation.submit`` of ``config``; never retried here or by any caller."""
    try:
        return Sent(await client.submit(config))
    except SnakeLabError as exc:
        return Refused(exc)
    except (SnakeLabUnavailable, SnakeLabProtocolError) as exc:
        return Unknown(str(exc))
    except ValidationError:
        return Unknown("SnakeLab's reply to simulation.submit is malformed")


async def created_runs(
    index: ConfigIndex, config: Mapping[str, Any], after_id: int
) -> list[IndexedRun]:
    """Stored runs of ``config`` with a SnakeLab id above ``after_id``, oldest first."""
    return [run for run in await index.find_indexed(config) if run.sl_id > after_id]


class SubmissionRefused(RuntimeError):
    """SnakeLab refused the configuration (a schema mismatch between Ax3l and SnakeLab)."""


class StatusLine(Protocol):
    """Where a waiting submitter says what it is waiting for (the loop's status)."""

    def error(self, message: str) -> None: ...


@dataclass(eq=False)
class OnceSubmitter:
    """Finds a usable run of a configuration, or submits it exactly once."""

    db: Database
    client: SnakeLabClient
    index: ConfigIndex
    interval: float
    status: StatusLine | None = None

    def _say(self, message: str) -> None:
        if self.status is not None:
            self.status.error(message)

    async def usable_run(self, config: dict[str, Any], exclude: Collection[str] = ()) -> str | None:
        """The newest stored run of ``config`` that has not failed, been cancelled or completed
        without a high score (such a run can never be a baseline or a re-test), and is not one
        of ``exclude``."""
        run_ids = [run_id for run_id in await self.index.find_runs(config) if run_id not in exclude]
        return await SnakeLabRuns(self.db).newest_usable(run_ids, UNUSABLE_STATES)

    async def reuse_or_submit(
        self,
        config: dict[str, Any],
        what: str,
        crash_after_submit: str | None = None,
        exclude: Collection[str] = (),
    ) -> tuple[str, bool]:
        """``(run_id, submitted_now)``: an existing usable run of ``config`` (none of
        ``exclude``: runs Ax3l already treats as failed though SnakeLab's row says otherwise,
        such as one failed at the run deadline) or a new one."""
        while True:
            existing = await self.usable_run(config, exclude)
            if existing is not None:
                logger.info("%s: reusing run %s of the same configuration", what, existing)
                return existing, False
            position = await self.index.position()
            outcome = await send_once(self.client, config)
            if isinstance(outcome, Sent):
                if crash_after_submit:
                    crash_point(crash_after_submit)
                logger.info("%s: submitted run %s", what, outcome.reply.run_id)
                return outcome.reply.run_id, True
            if isinstance(outcome, Refused):
                if outcome.error.code == "invalid_config":
                    raise SubmissionRefused(f"SnakeLab refused the {what} config: {outcome.error}")
                self._say(f"{what}: SnakeLab answered {outcome.error}")
                await asyncio.sleep(self.interval)
                continue
            # It may have been processed: look again once SnakeLab answers.
            self._say(f"{what}: {outcome.problem}")
            logger.warning(
                "%s: submit got no answer (%s); not resending blindly", what, outcome.problem
            )
            await self._until_healthy()
            created = await created_runs(self.index, config, position)
            if created:
                run_id = created[0].run_id
                logger.warning("%s: SnakeLab created run %s; its answer was lost", what, run_id)
                return run_id, True

    async def _until_healthy(self) -> None:
        while True:
            try:
                await self.client.health()
                return
            except (SnakeLabUnavailable, SnakeLabProtocolError, SnakeLabError):
                await asyncio.sleep(self.interval)
