"""The report server waits out a database outage in place.

At startup one attempt reaches the database and reads the cycle count; if the database is not
there, the attempt is repeated in the background with backoff while pages answer 503 and
``/ready`` says "waiting for the database since ...". An error no wait can fix (credentials,
privileges, a missing database) stops the server with a message that says what to do.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from ax3l.shared.db.availability import wait_for_database
from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError, DatabaseMisconfigured, DatabaseUnavailable
from ax3l.shared.tasks import stop_task

log = logging.getLogger(__name__)


def _stop_the_server() -> None:
    # uvicorn shuts down gracefully on SIGTERM; ``main`` then exits with the fatal error's code.
    os.kill(os.getpid(), signal.SIGTERM)


class DatabaseWatch:
    """Reach the database once at startup, else keep trying in the background."""

    def __init__(
        self,
        db: Database,
        pause_max: float,
        on_available: Callable[[], Awaitable[Any]],
        on_fatal: Callable[[], None] = _stop_the_server,
    ):
        self.db = db
        self.pause_max = pause_max
        self.on_available = on_available
        self.on_fatal = on_fatal
        self.fatal: DatabaseMisconfigured | None = None
        self._task: asyncio.Task[None] | None = None

    async def _attempt(self) -> None:
        await self.db.ping()
        await self.on_available()

    async def start(self) -> None:
        """One attempt now; raises ``DatabaseMisconfigured`` when no wait can help."""
        try:
            await self._attempt()
        except DatabaseMisconfigured as exc:
            self.fatal = exc
            log.error("%s", exc)
            raise
        except DatabaseError as exc:
            if isinstance(exc, DatabaseUnavailable):
                self.db.outage.begin(exc)
            log.warning("the database is not available yet (%s); waiting for it", exc)
            self._task = asyncio.create_task(self._wait(), name="database-wait")

    async def _wait(self) -> None:
        while True:
            try:
                await wait_for_database(self._attempt, self.db.outage, pause_max=self.pause_max)
                return
            except DatabaseMisconfigured as exc:
                self.fatal = exc
                log.error("stopping: %s", exc)
                self.on_fatal()
                return
            except DatabaseError as exc:
                log.warning("database check failed (%s); retrying in %g s", exc, self.pause_max)
                await asyncio.sleep(self.pause_max)

    async def stop(self) -> None:
        if self._task is not None:
            await stop_task(self._task)
            self._task = None
