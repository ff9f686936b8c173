"""Submitting the loop's own runs (seeding, seed baselines, infrastructure retries) at most once.

A submission that timed out may have been processed, and SnakeLab runs every valid submit, so
nothing is ever resent blindly (``ax3l.shared.submit_once``, which the broker's proposals use
too): before each submit the configuration is looked up in SnakeLab's tables, and after a lost
answer the loop waits until SnakeLab answers again and takes the run the submit created, if it
created one (a stored run of the configuration newer than the index position before the send).
Only when every stored run of the configuration failed, was cancelled or completed without a
high score is it submitted anew (a baseline's next attempt, or the retry of a run that never
trained; ``baselines`` and ``infra_retry`` bound how often).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ax3l.orchestrator.status import LoopStatus
from ax3l.shared.config_index import ConfigIndex
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.database import Database
from ax3l.shared.db.snakelab_reads import newest_usable_run
from ax3l.shared.snakelab_client import (
    SnakeLabClient,
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
)
from ax3l.shared.submit_once import Refused, Sent, created_runs, send_once

logger = logging.getLogger(__name__)

UNUSABLE_STATES = ("failed", "cancelled")


class SubmissionRefused(RuntimeError):
    """SnakeLab refused the configuration (a schema mismatch between Ax3l and SnakeLab)."""


class BaselineFailed(SubmissionRefused):
    """A seeding or seed-rotation baseline failed as often as the settings allow: like a refused
    configuration, this stops the loop, since no baseline means no comparison; the user acts."""


@dataclass(eq=False)
class OnceSubmitter:
    """Finds a usable run of a configuration, or submits it exactly once."""

    db: Database
    client: SnakeLabClient
    index: ConfigIndex
    interval: float
    status: LoopStatus

    async def usable_run(self, config: dict[str, Any]) -> str | None:
        """The newest stored run of ``config`` that has not failed, been cancelled or completed
        without a high score (such a run can never become a baseline)."""
        run_ids = await self.index.find_runs(config)
        return await newest_usable_run(self.db, run_ids, UNUSABLE_STATES)

    async def reuse_or_submit(
        self, config: dict[str, Any], what: str, crash_after_submit: str
    ) -> tuple[str, bool]:
        """``(run_id, submitted_now)``: an existing usable run of ``config`` or a new one."""
        while True:
            existing = await self.usable_run(config)
            if existing is not None:
                logger.info("%s: reusing run %s of the same configuration", what, existing)
                return existing, False
            position = await self.index.position()
            outcome = await send_once(self.client, config)
            if isinstance(outcome, Sent):
                crash_point(crash_after_submit)
                logger.info("%s: submitted run %s", what, outcome.reply.run_id)
                return outcome.reply.run_id, True
            if isinstance(outcome, Refused):
                if outcome.error.code == "invalid_config":
                    raise SubmissionRefused(f"SnakeLab refused the {what} config: {outcome.error}")
                self.status.error(f"{what}: SnakeLab answered {outcome.error}")
                await asyncio.sleep(self.interval)
                continue
            # It may have been processed: look again once SnakeLab answers.
            self.status.error(f"{what}: {outcome.problem}")
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
