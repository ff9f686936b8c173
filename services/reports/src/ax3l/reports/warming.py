"""The report server's in-memory tables, read once in the background as soon as the database
answers, so that the first visitor does not wait for them.

At 100,000 runs the first read of the runs table takes seconds (``queries/runs.py``), as does
the first fold of the proposers' leaderboards (``queries/proposer_board.py``). The server is
ready (``/health``, ``/ready``) without them: the reads run in a task of their own. A request
that needs a table while it is being read waits on the table's lock for that same read and then
reads only what changed since: the table is never read twice. A failed read (the database went
away) is left to the first request, which reads it as before.
"""

from __future__ import annotations

import asyncio
import logging

from ax3l.reports.resources import Resources
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.tasks import stop_task

log = logging.getLogger(__name__)


class Warmer:
    """Reads the runs table, then the proposers' leaderboards, in one background task."""

    def __init__(self, resources: Resources, configured_model: str | None):
        self.resources = resources
        self.configured_model = configured_model
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the reads, once (later calls, e.g. after a database outage, do nothing)."""
        if self._task is None:
            self._task = asyncio.create_task(self._warm(), name="reports-warming")

    async def _warm(self) -> None:
        resources = self.resources
        try:
            await resources.runs.frame(resources.db, resources.schema)
            await resources.proposers.read(resources.db, self.configured_model)
        except DatabaseError as exc:
            log.info("reading the tables at startup failed (%s); the first request reads them", exc)

    async def stop(self) -> None:
        if self._task is not None:
            await stop_task(self._task)
            self._task = None
