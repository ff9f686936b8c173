"""MCP sessions ready before they are needed: the next turns' children start during the wait.

Spawning an MCP child (a Python process importing the MCP SDK) costs about a second, paid on
every step when the conversation starts it. The loop knows the next turns' entries while a run
trains, so it asks the pool to *prepare* their sessions then: each is spawned, initialised and
its tool discovered in a task of its own, and the conversation for that entry takes it over.
Every conversation still has its own session, bound by ``AX3L_CONVERSATION_PARAMETER``, and it
is closed when its conversation ends.

The MCP SDK requires a client to enter and leave its session in the same task, so a
``PreparedSession`` is a task that owns the session's context manager: it opens the session,
hands the open ``BoundSession`` over through a future, and closes it when released. A session
nobody takes (an exhausted entry, a seed rotation, another turn than predicted) is released by
the next ``prepare`` or by ``close``; nothing is kept across a restart, because the pool lives
in memory only and a dead orchestrator's children see their stdin close and exit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress

from ax3l.orchestrator.mcp_session import BoundSession, ToolSessionFailed
from ax3l.shared.registry import ENTRIES, Entry

logger = logging.getLogger(__name__)

# How a session for an entry is opened: ``mcp_session.bound_session`` with the MCP settings.
Opener = Callable[[Entry], AbstractAsyncContextManager[BoundSession]]


class PreparedSession:
    """One bound MCP session, opened, held and closed by a task of its own."""

    def __init__(self, entry: Entry, open_session: Opener):
        self.entry = entry
        self._ready: asyncio.Future[BoundSession] = asyncio.get_running_loop().create_future()
        self._release = asyncio.Event()
        self.task = asyncio.create_task(self._own(open_session), name=f"mcp-session-{entry.name}")

    async def _own(self, open_session: Opener) -> None:
        try:
            async with open_session(self.entry) as session:
                self._ready.set_result(session)
                await self._release.wait()
        except BaseException as exc:
            if not self._ready.done():
                failure = (
                    exc
                    if isinstance(exc, Exception)
                    else ToolSessionFailed(f"the MCP session for {self.entry.name} was stopped")
                )
                self._ready.set_exception(failure)
            raise

    @property
    def usable(self) -> bool:
        """Still starting or open (not failed, not released)."""
        return not self.task.done() and not self._release.is_set()

    async def session(self) -> BoundSession:
        """The open session, once it is ready (its start-up error otherwise)."""
        return await asyncio.shield(self._ready)

    def release(self) -> None:
        """Let the owning task close the session: at once when it is open, else as soon as it
        is (a start is never cancelled half way, so no child outlives a torn-down start)."""
        self._release.set()

    async def closed(self) -> None:
        """Release the session and wait until its child is gone; errors are only logged."""
        self.release()
        try:
            # Shielded: a caller being cancelled must not cut the child's shutdown short.
            with suppress(Exception):
                await asyncio.shield(self.task)
        except asyncio.CancelledError:
            if not self.task.cancelled():
                raise
        self.settle()

    def settle(self) -> None:
        """Retrieve the outcome of a finished task (a session nobody used fails quietly)."""
        if not self.task.done():
            return
        if not self.task.cancelled() and self.task.exception() is not None:
            logger.info("MCP session for %s ended with %s", self.entry.name, self.task.exception())
        if self._ready.done() and not self._ready.cancelled():
            self._ready.exception()


class SessionPool:
    """Bound MCP sessions for the next turns, and the handover to each conversation.

    ``open_session`` starts one; ``ahead`` (``AX3L_MCP_PREPARED_AHEAD``) is how many turns after
    the current one get a session in advance (0: every conversation starts its own, as without
    a pool).
    """

    def __init__(self, open_session: Opener, ahead: int):
        self.open_session = open_session
        self.ahead = ahead
        self._prepared: list[PreparedSession] = []
        self._closing: set[PreparedSession] = set()

    def upcoming(self, index: int, include_current: bool = False) -> list[Entry]:
        """The entries of the ``ahead`` turns after round-robin ``index`` (and ``index``'s own
        first when its conversation is about to start), the ones that get a session early."""
        if not self.ahead:
            return []
        count = len(ENTRIES)
        start = 0 if include_current else 1
        last = min(self.ahead, count - 1)
        return [ENTRIES[(index + offset) % count] for offset in range(start, last + 1)]

    def prepare(self, entries: Sequence[Entry]) -> None:
        """Have a session starting or open for exactly ``entries``: start the missing ones,
        release the others (a turn that will not come as predicted)."""
        wanted = {entry.name for entry in entries}
        keep: list[PreparedSession] = []
        for prepared in self._prepared:
            if prepared.entry.name in wanted and prepared.usable:
                wanted.discard(prepared.entry.name)
                keep.append(prepared)
            else:
                self._retire(prepared)
        for entry in entries:
            if entry.name in wanted:
                keep.append(PreparedSession(entry, self.open_session))
                wanted.discard(entry.name)
        self._prepared = keep

    def _take(self, entry: Entry) -> PreparedSession | None:
        for prepared in self._prepared:
            if prepared.entry.name == entry.name:
                self._prepared.remove(prepared)
                if prepared.usable:
                    return prepared
                self._retire(prepared)
                return None
        return None

    def _retire(self, prepared: PreparedSession) -> None:
        """Close ``prepared`` in the background (``close`` waits for the stragglers)."""
        prepared.release()
        if prepared.task.done():
            prepared.settle()
            return
        self._closing.add(prepared)

        def done(_: asyncio.Task[None]) -> None:
            self._closing.discard(prepared)
            prepared.settle()

        prepared.task.add_done_callback(done)

    @asynccontextmanager
    async def session(
        self, entry: Entry, timings: list[BoundSession] | None = None
    ) -> AsyncIterator[BoundSession]:
        """The session for one conversation of ``entry``: the prepared one, else a new one.

        It is closed when the conversation ends (by its own task, so the next step need not
        wait for the child to exit). The session is appended to ``timings`` with ``prepared``
        and ``wait_seconds`` (how long the conversation waited for it).
        """
        began = time.perf_counter()
        current = self._take(entry)
        try:
            session = None if current is None else await self._check(current)
            if session is None:
                if current is not None:
                    self._retire(current)
                current = PreparedSession(entry, self.open_session)
                session = await current.session()
            else:
                session.prepared = True
            session.wait_seconds = time.perf_counter() - began
            if timings is not None:
                timings.append(session)
            yield session
        finally:
            if current is not None:
                self._retire(current)

    @staticmethod
    async def _check(prepared: PreparedSession) -> BoundSession | None:
        """The prepared session if it opened and its child still answers, else None (its start
        failed, the broker being away say, or the child died while it waited)."""
        try:
            session = await prepared.session()
        except Exception as exc:
            logger.info("the prepared MCP session for %s failed: %s", prepared.entry.name, exc)
            return None
        return session if await session.alive() else None

    async def close(self) -> None:
        """Close every session: the prepared ones and those still closing."""
        everything = [*self._prepared, *self._closing]
        self._prepared = []
        for prepared in everything:
            prepared.release()
        for prepared in everything:
            await prepared.closed()
        self._closing.clear()
