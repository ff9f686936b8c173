"""Prepared MCP sessions: started before their conversation, bound to their entry, handed over
once, and every child closed (counted in /proc) whatever happens to the prediction."""

from __future__ import annotations

import asyncio
import os
import time
from functools import partial

import pytest

from ax3l.orchestrator.mcp_session import BoundSession, bound_session
from ax3l.orchestrator.session_pool import Opener, SessionPool
from ax3l.shared.registry import BY_NAME, ENTRIES
from ax3l.shared.settings import Settings
from ax3l.testing.mcp_children import mcp_children as children_of
from ax3l.testing.plugin import free_port

DEADLINE = 60.0


def mcp_children() -> dict[int, str]:
    """This process's MCP sessions: pid -> their binding."""
    return children_of(os.getpid())


async def until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"not {what} after {DEADLINE} s: {mcp_children()}"
        await asyncio.sleep(0.05)


@pytest.fixture
def opener() -> Opener:
    return partial(
        bound_session, settings=Settings(AX3L_ZMQ_ENDPOINT=f"tcp://127.0.0.1:{free_port()}")
    )


def test_upcoming_names_the_next_turns_in_round_robin_order(opener: Opener) -> None:
    """``ahead`` turns after the index (wrapping), the current one first when asked for."""
    pool = SessionPool(opener, ahead=2)
    assert [e.name for e in pool.upcoming(5)] == [ENTRIES[6].name, ENTRIES[0].name]
    assert [e.name for e in pool.upcoming(6, include_current=True)] == [
        ENTRIES[6].name,
        ENTRIES[0].name,
        ENTRIES[1].name,
    ]
    assert SessionPool(opener, ahead=0).upcoming(3, include_current=True) == []
    assert len(SessionPool(opener, ahead=6).upcoming(0)) == 6


async def test_a_prepared_session_is_handed_to_its_conversation_and_closed_after(
    opener: Opener,
) -> None:
    """The session started in advance is the one the conversation gets, bound to its entry."""
    pool = SessionPool(opener, ahead=1)
    entry = ENTRIES[1]
    pool.prepare(pool.upcoming(0))
    await until(lambda: list(mcp_children().values()) == [entry.name], "one child for the entry")
    (pid,) = mcp_children()
    await asyncio.sleep(0)
    timings: list[BoundSession] = []
    try:
        async with pool.session(entry, timings) as session:
            assert session.tool.name == entry.tool_name
            assert session.prepared is True
            assert list(mcp_children()) == [pid]
        assert timings == [session]
        await until(lambda: not mcp_children(), "the child closed after its conversation")
        await until(lambda: session.close_seconds is not None, "the session's close measured")
    finally:
        await pool.close()


async def test_an_unprepared_entry_gets_a_fresh_session_and_the_guess_is_closed(
    opener: Opener,
) -> None:
    """A conversation for another entry than predicted spawns its own; the unused one closes
    at the next prepare, and no child is left."""
    pool = SessionPool(opener, ahead=1)
    try:
        pool.prepare([BY_NAME["gamma"]])
        async with pool.session(BY_NAME["hidden_size"]) as session:
            assert session.prepared is False
            assert session.tool.name == BY_NAME["hidden_size"].tool_name
        pool.prepare([BY_NAME["batch_size"]])  # gamma was skipped (exhausted, say)
        await until(
            lambda: list(mcp_children().values()) == ["batch_size"], "only batch_size's child"
        )
    finally:
        await pool.close()
    assert not mcp_children()


async def test_close_stops_sessions_still_starting(opener: Opener) -> None:
    """Closing the pool while its sessions start (a shutdown mid-wait) leaves no child."""
    pool = SessionPool(opener, ahead=3)
    pool.prepare(pool.upcoming(2, include_current=True))
    await asyncio.sleep(0.05)
    await pool.close()
    assert not mcp_children()


async def test_a_cancelled_conversation_still_closes_its_session(opener: Opener) -> None:
    """A conversation cancelled while it holds the session (SIGTERM) does not leak the child."""
    pool = SessionPool(opener, ahead=1)
    entered = asyncio.Event()

    async def conversation() -> None:
        async with pool.session(BY_NAME["gamma"]):
            entered.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(conversation())
    await asyncio.wait_for(entered.wait(), DEADLINE)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await pool.close()
    assert not mcp_children()


async def test_a_dead_prepared_session_is_replaced(opener: Opener) -> None:
    """A prepared child that died while idle is not handed over: a fresh one is started."""
    pool = SessionPool(opener, ahead=1)
    try:
        pool.prepare([BY_NAME["gamma"]])
        await until(lambda: len(mcp_children()) == 1, "the prepared child")
        (pid,) = mcp_children()
        await until(lambda: pool._prepared[0]._ready.done(), "the session open")
        os.kill(pid, 9)
        await until(lambda: pid not in mcp_children(), "the child dead")
        async with pool.session(BY_NAME["gamma"]) as session:
            assert session.prepared is False
            assert session.tool.name == BY_NAME["gamma"].tool_name
            assert len(mcp_children()) == 1 and pid not in mcp_children()
    finally:
        await pool.close()
    assert not mcp_children()
