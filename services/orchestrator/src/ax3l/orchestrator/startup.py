"""Startup: wait until SnakeLab's tables exist, refuse a changed order, adopt lost submissions,
refuse a SnakeLab that has runs when Ax3l has no experiment (``ax3l.shared.db.adopt``: the
message names a fresh SnakeLab database and ``ax3l-db adopt``), then wait until SnakeLab is idle.

On a fresh machine the orchestrator may start before SnakeLab has created its tables; that is
a wait, not an error. Once the loop runs, database errors stop it. A run someone else left on
SnakeLab is waited out before the first step, so Ax3l's next run does not queue behind it;
the run of Ax3l's own unfinished submission is not, because the first step waits for it anyway.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ax3l.orchestrator.comparison import pending_proposal
from ax3l.orchestrator.seed_rotation import pending_rotation, pending_rotation_run
from ax3l.orchestrator.seeding import default_config, pending_seeding_run
from ax3l.orchestrator.services import Runs
from ax3l.orchestrator.status import LoopStatus
from ax3l.orchestrator.turns import check_stored_order
from ax3l.shared.db import intents
from ax3l.shared.db.adopt import AdoptionNeeded, refusal
from ax3l.shared.db.database import Database, tables_present
from ax3l.shared.db.errors import DatabaseUnavailable
from ax3l.shared.db.reads import current_golden
from ax3l.shared.snakelab_client import (
    SnakeLabClient,
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
)

logger = logging.getLogger(__name__)

SNAKELAB_TABLES = ("simulation_runs", "configurations")
LOG_EVERY = 30.0


async def wait_for_snakelab_tables(
    db: Database, status: LoopStatus, name: str, poll: float
) -> None:
    """Return once SnakeLab's tables are readable; report the wait in the status meanwhile."""
    logged = 0.0
    while True:
        try:
            if await tables_present(db, SNAKELAB_TABLES, "looking for SnakeLab's tables", name):
                return
            problem = f"waiting for SnakeLab's tables in database {name} (is SnakeLab started?)"
        except DatabaseUnavailable as exc:
            problem = f"waiting for the database: {exc}"
        status.error(problem)
        if time.monotonic() - logged > LOG_EVERY:
            logger.warning("%s", problem)
            logged = time.monotonic()
        await asyncio.sleep(poll)


async def own_pending_run(runs: Runs) -> str | None:
    """The run the first step will wait for: seeding's, a pending seed rotation's baseline, or
    the latest accepted proposal's (the same lookups, in the same order, as the loop's step)."""
    golden_event = await current_golden(runs.db)
    if golden_event is None:
        return await pending_seeding_run(runs)
    rotation = await pending_rotation(runs.db, golden_event[0])
    if rotation is not None:
        return await pending_rotation_run(runs, rotation)
    pending = await pending_proposal(runs.db)
    return None if pending is None else pending.run_id


async def wait_for_idle_snakelab(
    runs: Runs, snakelab: SnakeLabClient, status: LoopStatus, poll: float
) -> None:
    """Return once SnakeLab's active run is none or Ax3l's own pending run."""
    logged = 0.0
    own: str | None = None
    own_looked_up = False
    while True:
        try:
            active = await snakelab.active()
        except (SnakeLabUnavailable, SnakeLabProtocolError, SnakeLabError) as exc:
            # Not answering now: start anyway; the steps wait for SnakeLab and report that.
            logger.warning("could not ask SnakeLab whether it is idle (%s); starting", exc)
            return
        if active is None:
            return
        if not own_looked_up:
            own, own_looked_up = await own_pending_run(runs), True
        if active.run_id == own:
            return
        problem = (
            f"waiting for SnakeLab to become idle: run {active.run_id} ({active.state})"
            " is not one of Ax3l's"
        )
        status.error(problem)
        if time.monotonic() - logged > LOG_EVERY:
            logger.warning("%s", problem)
            logged = time.monotonic()
        await asyncio.sleep(poll)


async def prepare(
    runs: Runs, snakelab: SnakeLabClient, status: LoopStatus, db_name: str, poll: float
) -> None:
    """Everything before the first step (``AX3L_SNAKELAB_DB_NAME``, ``AX3L_POLL_INTERVAL``)."""
    await wait_for_snakelab_tables(runs.db, status, db_name, poll)
    await check_stored_order(runs.db)
    adopted = await intents.reconcile(runs.db, runs.schema, runs.log, index=runs.index)
    if adopted:
        logger.warning("adopted runs of interrupted submissions: %s", ", ".join(adopted))
    refused = await refusal(runs.db, runs.schema.flatten(default_config(runs.schema)))
    if refused is not None:
        raise AdoptionNeeded(refused)
    await wait_for_idle_snakelab(runs, snakelab, status, poll)
