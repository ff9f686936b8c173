"""Startup: wait until SnakeLab's tables exist, refuse a changed order, adopt lost submissions,
then wait until SnakeLab is idle.

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
from ax3l.orchestrator.seeding import pending_seeding_run
from ax3l.orchestrator.services import LoopServices
from ax3l.orchestrator.turns import check_stored_order
from ax3l.shared import intents
from ax3l.shared.db.errors import DatabaseUnavailable
from ax3l.shared.db.reads import current_golden
from ax3l.shared.snakelab_client import (
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
)

logger = logging.getLogger(__name__)

SNAKELAB_TABLES = ("simulation_runs", "configurations")
LOG_EVERY = 30.0


async def snakelab_tables_present(services: LoopServices) -> bool:
    db = services.db
    row = await db.fetchone(
        "SELECT COUNT(*) AS n FROM information_schema.tables"
        " WHERE table_schema = %s AND table_name IN (%s, %s)",
        (services.settings.snakelab_db_name, *SNAKELAB_TABLES),
        doing="looking for SnakeLab's tables",
    )
    return row is not None and int(row["n"]) == len(SNAKELAB_TABLES)


async def wait_for_snakelab_tables(services: LoopServices) -> None:
    """Return once SnakeLab's tables are readable; report the wait in the status meanwhile."""
    name = services.settings.snakelab_db_name
    logged = 0.0
    while True:
        try:
            if await snakelab_tables_present(services):
                return
            problem = f"waiting for SnakeLab's tables in database {name} (is SnakeLab started?)"
        except DatabaseUnavailable as exc:
            problem = f"waiting for the database: {exc}"
        services.status.error(problem)
        if time.monotonic() - logged > LOG_EVERY:
            logger.warning("%s", problem)
            logged = time.monotonic()
        await asyncio.sleep(services.settings.snakelab_poll_interval)


async def own_pending_run(services: LoopServices) -> str | None:
    """The run the first step will wait for: seeding's, a pending seed rotation's baseline, or
    the latest accepted proposal's (the same lookups, in the same order, as the loop's step)."""
    golden_event = await current_golden(services.db)
    if golden_event is None:
        return await pending_seeding_run(services)
    rotation = await pending_rotation(services, golden_event[0])
    if rotation is not None:
        return await pending_rotation_run(services, rotation)
    pending = await pending_proposal(services)
    return None if pending is None else pending.run_id


async def wait_for_idle_snakelab(services: LoopServices) -> None:
    """Return once SnakeLab's active run is none or Ax3l's own pending run."""
    logged = 0.0
    own: str | None = None
    own_looked_up = False
    while True:
        try:
            active = await services.snakelab.active()
        except (SnakeLabUnavailable, SnakeLabProtocolError, SnakeLabError) as exc:
            # Not answering now: start anyway; the steps wait for SnakeLab and report that.
            logger.warning("could not ask SnakeLab whether it is idle (%s); starting", exc)
            return
        if active is None:
            return
        if not own_looked_up:
            own, own_looked_up = await own_pending_run(services), True
        if active.run_id == own:
            return
        problem = (
            f"waiting for SnakeLab to become idle: run {active.run_id} ({active.state})"
            " is not one of Ax3l's"
        )
        services.status.error(problem)
        if time.monotonic() - logged > LOG_EVERY:
            logger.warning("%s", problem)
            logged = time.monotonic()
        await asyncio.sleep(services.settings.snakelab_poll_interval)


async def prepare(services: LoopServices) -> None:
    """Everything before the first step."""
    await wait_for_snakelab_tables(services)
    await check_stored_order(services.db)
    adopted = await intents.reconcile(
        services.db, services.schema, services.log, index=services.index
    )
    if adopted:
        logger.warning("adopted runs of interrupted submissions: %s", ", ".join(adopted))
    await wait_for_idle_snakelab(services)
