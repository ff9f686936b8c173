"""Startup: wait until SnakeLab's tables exist, refuse a changed order, adopt lost submissions.

On a fresh machine the orchestrator may start before SnakeLab has created its tables; that is
a wait, not an error. Once the loop runs, database errors stop it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ax3l.orchestrator.services import LoopServices
from ax3l.orchestrator.turns import check_stored_order
from ax3l.shared import intents
from ax3l.shared.db.errors import DatabaseUnavailable

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


async def prepare(services: LoopServices) -> None:
    """Everything before the first step."""
    await wait_for_snakelab_tables(services)
    await check_stored_order(services.db)
    adopted = await intents.reconcile(
        services.db, services.schema, services.log, index=services.index
    )
    if adopted:
        logger.warning("adopted runs of interrupted submissions: %s", ", ".join(adopted))
