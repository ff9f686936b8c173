"""Timeouts, outages and errors no wait can fix, against the real private MariaDB."""

import asyncio
import socket
import threading
import time

import pytest

from ax3l.shared.db.availability import Outage, wait_for_database
from ax3l.shared.db.cli import ensure_schema
from ax3l.shared.db.database import Database, session_limits
from ax3l.shared.db.errors import (
    DatabaseMisconfigured,
    DatabaseTimeout,
    DatabaseUnavailable,
)


async def test_a_hung_query_fails_at_the_query_timeout(databases):
    """SELECT SLEEP(30) with a 1 s query timeout fails with DatabaseTimeout in about 1 s, and
    the pool goes on serving."""
    async with Database(databases.settings(AX3L_DB_QUERY_TIMEOUT=1)) as db:
        started = time.monotonic()
        with pytest.raises(DatabaseTimeout, match="sleeping"):
            await db.fetchone("SELECT SLEEP(30) AS s", doing="sleeping")
        assert time.monotonic() - started < 5
        assert await db.fetchone("SELECT 1 AS one") == {"one": 1}


async def test_a_metadata_lock_fails_the_statement_not_the_service(databases):
    """A table locked by another connection makes a write fail within the query timeout."""
    blocker = databases.connect("admin", databases.ax3l_db)
    try:
        with blocker.cursor() as cur:
            cur.execute("LOCK TABLES events WRITE")
        async with Database(databases.settings(AX3L_DB_QUERY_TIMEOUT=1)) as db:
            started = time.monotonic()
            with pytest.raises(DatabaseTimeout):
                async with db.transaction("writing an event") as cur:
                    await cur.execute("INSERT INTO events (name, log_level) VALUES ('x', 'INFO')")
            assert time.monotonic() - started < 5
            with blocker.cursor() as cur:
                cur.execute("UNLOCK TABLES")
            assert await db.fetchone("SELECT COUNT(*) AS n FROM events") == {"n": 0}
    finally:
        blocker.close()


@pytest.fixture
def silent_server():
    """A TCP port that accepts connections and never says a word (a hung server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


async def test_connecting_to_a_hung_server_fails_at_the_acquire_timeout(databases, silent_server):
    """A server that accepts but never answers costs one acquire timeout, not a hang."""
    db = Database(databases.settings(DB_PORT=silent_server, AX3L_DB_ACQUIRE_TIMEOUT=0.5))
    started = time.monotonic()
    with pytest.raises(DatabaseTimeout, match=r"0\.5 s"):
        await db.fetchone("SELECT 1")
    assert time.monotonic() - started < 3
    assert db.outage.active
    await db.close()


async def test_an_exhausted_pool_fails_at_the_acquire_timeout(databases):
    """When every pooled connection is busy, another acquire gives up after its timeout."""
    db = Database(databases.settings(AX3L_DB_POOL_SIZE=1, AX3L_DB_ACQUIRE_TIMEOUT=0.3))
    async with db:
        async with db.transaction("holding the only connection"):
            with pytest.raises(DatabaseTimeout, match="pool of 1"):
                await db.fetchone("SELECT 1")
        assert await db.fetchone("SELECT 1 AS one") == {"one": 1}


async def test_bad_credentials_say_what_to_do(databases):
    """A refused login is DatabaseMisconfigured naming the settings to check, for the pool and
    for the schema check."""
    settings = databases.settings(DB_PASSWORD="wrong")
    with pytest.raises(DatabaseMisconfigured, match="DB_PASSWORD"):
        await Database(settings).open()
    with pytest.raises(DatabaseMisconfigured, match="DB_PASSWORD"):
        ensure_schema(settings)


async def test_a_missing_privilege_says_what_to_do(databases):
    """Writing SnakeLab's tables (SELECT only) is DatabaseMisconfigured with advice."""
    async with Database(databases.settings()) as db:
        with pytest.raises(DatabaseMisconfigured, match="grant"):
            async with db.transaction("writing SnakeLab's tables") as cur:
                await cur.execute(f"CREATE TABLE {db.sl('sneaky')} (id INT)")


async def test_dropped_connections_are_replaced_and_the_outage_closes(databases):
    """After the server drops every pooled connection (as a restart does), the next read still
    succeeds on a fresh connection."""
    async with Database(databases.settings()) as db:
        await asyncio.gather(*(db.fetchone("SELECT SLEEP(0.05)") for _ in range(3)))
        admin = databases.connect("admin")
        try:
            with admin.cursor() as cur:
                cur.execute(
                    "SELECT id FROM information_schema.processlist WHERE db = %s",
                    (databases.ax3l_db,),
                )
                for (thread_id,) in cur.fetchall():
                    cur.execute(f"KILL CONNECTION {int(thread_id)}")
        finally:
            admin.close()
        assert await db.fetchone("SELECT 1 AS one") == {"one": 1}
        assert not db.outage.active


async def test_waiting_for_the_database_backs_off_until_it_answers():
    """wait_for_database retries unavailable attempts, reports the outage, and returns the
    first success; an error no wait can fix ends the wait at once."""
    outage = Outage()
    calls = []

    async def flaky() -> str:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise DatabaseUnavailable("connecting: database unavailable (2003: refused)")
        assert outage.describe() is not None and "waiting for the database since" in (
            outage.describe() or ""
        )
        return "up"

    assert await wait_for_database(flaky, outage, pause_max=0.05) == "up"
    assert len(calls) == 3 and not outage.active

    async def refused() -> None:
        raise DatabaseMisconfigured("login refused: check DB_USER and DB_PASSWORD")

    with pytest.raises(DatabaseMisconfigured):
        await wait_for_database(refused, outage, pause_max=0.05)


def test_session_limits_fit_the_server():
    """MariaDB bounds every statement in seconds, MySQL its reads in milliseconds; both bound
    lock waits."""
    maria = session_limits("10.11.19-MariaDB-0+deb12u1", 1.5)
    assert "max_statement_time = 1.5" in maria and "lock_wait_timeout = 2" in maria
    mysql = session_limits("8.4.3", 30)
    assert "max_execution_time = 30000" in mysql and "innodb_lock_wait_timeout = 30" in mysql
