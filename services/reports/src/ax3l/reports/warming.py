"""The report server's runs table, read once in the background as soon as the database
answers, so that the first visitor does not wait for it.

At 100,000 runs the first read of the runs table takes seconds (``queries/runs.py``), mostly
waiting for the database. The server is ready (``/health``, ``/ready``) without it: the read
runs in a task of its own. A request that needs the table while it is being read waits on the
table's lock for that same read and then reads only what changed since: the table is never
read twice. A failed read (the database went away) is left to the first request, which reads
it as before.

The proposers' leaderboards (``queries/proposer_board.py``) are not warmed: their first fold is
Python work on the event loop (seconds at a million events) that would hold up every other
request right after each start, visited or not; the first visit to ``/proposers`` pays it.
"""

from __future__ import annotations

import asyncio
import logging

from ax3l.reports.resources import Resources
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.tasks import stop_task

log = logging.getLogger(__name__)


class Warmer:
    """Reads the runs table in a background task."""

    def __init__(self, resources: Resources):
        self.resources = resources
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the reads, once (later calls, e.g. after a database outage, do nothing)."""
        if self._task is None:
            self._task = asyncio.create_task(self._warm(), name="reports-warming")

    async def _warm(self) -> None:
        resources = self.resources
        try:
            await resources.runs.frame(resources.db, resources.schema)
        except DatabaseError as exc:
            log.info("reading the runs table at startup failed (%s); a request will read it", exc)

    async def stop(self) -> None:
        if self._task is not None:
            await stop_task(self._task)
            self._task = None
