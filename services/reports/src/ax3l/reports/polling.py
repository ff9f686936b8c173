"""A value polled in the background, so pages read the latest answer and never wait on it.

The SnakeLab and orchestrator monitors poll this way: a page that asked a service itself
would take the whole timeout whenever the service is down.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from ax3l.shared.tasks import stop_task

T = TypeVar("T")


class BackgroundPoll(ABC, Generic[T]):
    """Polls every ``interval`` seconds in a task started by the app's lifespan; ``latest``
    is the last poll's result (``initial`` until the first)."""

    task_name = "poll"

    def __init__(self, interval: float, initial: T):
        self.interval = interval
        self.latest = initial
        self._first = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    @abstractmethod
    async def poll_once(self) -> T:
        """Ask once and return the result; never raises."""

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.task_name)

    async def stop(self) -> None:
        if self._task is not None:
            # The flag ends the loop even when a poll swallows the cancellation.
            self._stopping = True
            await stop_task(self._task)
            self._task = None

    async def current(self, wait: float) -> T:
        """The latest poll; right after start, wait up to ``wait`` seconds for the first one."""
        if not self._first.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first.wait(), wait)
        return self.latest

    async def _run(self) -> None:
        while not self._stopping:
            self.latest = await self.poll_once()
            self._first.set()
            await asyncio.sleep(self.interval)
