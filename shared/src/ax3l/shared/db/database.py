"""The one database context: a recycling aiomysql pool, transactions, domain errors, timeouts.

Every statement has a deadline (``AX3L_DB_QUERY_TIMEOUT``): the server enforces it
(``max_statement_time`` on MariaDB, ``max_execution_time`` for MySQL's reads, and
``lock_wait_timeout``/``innodb_lock_wait_timeout`` for lock waits on both), and the client cuts
the connection shortly after, for what the server cannot see (a hung network). Every pool
acquire, connecting included, has one too (``AX3L_DB_ACQUIRE_TIMEOUT``). A timeout is a
``DatabaseTimeout``: the caller's step fails, the service does not hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Sequence, Sized
from typing import Any, TypeVar

import aiomysql
import pymysql

from ax3l.shared.db.availability import DiskFullSpell, Outage
from ax3l.shared.db.errors import (
    DatabaseError,
    DatabaseTimeout,
    DatabaseUnavailable,
    DiskFull,
    translate,
)
from ax3l.shared.settings import DbSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long closing waits for connections still in use before it cuts them.
CLOSE_GRACE_SECONDS = 5.0
# How much longer than the server's own limit the client waits before it cuts the connection.
CLIENT_DEADLINE_MARGIN = 2.0
# Longest connect attempt (the acquire timeout bounds it too).
CONNECT_TIMEOUT_SECONDS = 10.0

_DRIVER_ERRORS = (pymysql.err.MySQLError, OSError)
# Statements that write nothing (a transaction of only these does not prove the disk has room).
_READ_ONLY = re.compile(r"\s*(?:SELECT|SHOW|SET|EXPLAIN|DO)\b", re.IGNORECASE)


def quote_identifier(name: str) -> str:
    """A MySQL identifier in backquotes (database names come from settings)."""
    if not name or "\x00" in name or len(name) > 64:
        raise ValueError(f"invalid identifier {name!r}")
    return "`" + name.replace("`", "``") + "`"


def placeholders(values: Sized) -> str:
    """``%s, %s, ...``: one parameter marker per value, for ``IN (...)``."""
    return ", ".join(["%s"] * len(values))


GROUP_ROWS = 500  # rows per value of ``grouped_lines``
GROUP_CONCAT_MAX = 64 * 1024 * 1024  # bytes of one such value (500 lines are about 70 KB)


async def grouped_lines(db: Database, rows_sql: str, key: str, args: Any, joiner: str) -> list[str]:
    """The rows ``rows_sql`` selects (a ``line`` each, in ``key`` order) in blocks of
    ``GROUP_ROWS`` lines joined by ``joiner``: the driver's cost is per row, so 100,000 rows
    arrive as 200 values."""
    sql = (
        f"SELECT GROUP_CONCAT(line ORDER BY k SEPARATOR '{joiner}') AS block FROM"
        f" (SELECT {key} AS k, line, ROW_NUMBER() OVER (ORDER BY {key}) AS n FROM ({rows_sql})"
        f" picked) numbered GROUP BY (n - 1) DIV {GROUP_ROWS} ORDER BY MIN(k)"
    )
    async with db.transaction("reading runs") as cur:
        await cur.execute(f"SET SESSION group_concat_max_len = {GROUP_CONCAT_MAX}")
        await cur.execute(sql, args)
        rows = await cur.fetchall()
    return [str(row["block"]) for row in rows if row["block"] is not None]


async def tables_present(
    db: Database, names: Sequence[str], doing: str, schema: str | None = None
) -> bool:
    """Whether every table of ``names`` exists in database ``schema`` (None: ``db``'s own)."""
    row = await db.fetchone(
        "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = "
        + ("%s" if schema is not None else "DATABASE()")
        + f" AND table_name IN ({placeholders(names)})",
        ([schema] if schema is not None else []) + list(names),
        doing=doing,
    )
    return row is not None and int(row["n"]) == len(names)


def session_limits(server_info: str, query_timeout: float) -> str:
    """The ``SET SESSION`` statement that bounds every statement on a connection."""
    lock_wait = max(1, math.ceil(query_timeout))
    if "mariadb" in server_info.lower():
        limit = f"max_statement_time = {query_timeout:g}"
    else:
        limit = f"max_execution_time = {max(1, math.ceil(query_timeout * 1000))}"
    return (
        f"SET SESSION {limit}, lock_wait_timeout = {lock_wait},"
        f" innodb_lock_wait_timeout = {lock_wait}"
    )


class _TimedCursor:
    """A cursor whose statements fail with ``DatabaseTimeout`` at the client's deadline."""

    def __init__(self, cursor: Any, conn: Any, deadline: float, doing: str):
        self._cursor = cursor
        self._conn = conn
        self._deadline = deadline
        self._doing = doing
        self.wrote = False  # a statement other than a read ran

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    async def execute(self, sql: str, args: Any = None) -> Any:
        return await self._run(self._cursor.execute, sql, args)

    async def executemany(self, sql: str, args: Any) -> Any:
        return await self._run(self._cursor.executemany, sql, args)

    async def _run(self, method: Any, sql: str, args: Any) -> Any:
        self.wrote = self.wrote or not _READ_ONLY.match(sql)
        return await _bounded(method(sql, args), self._conn, self._deadline, self._doing)


async def _bounded(awaitable: Awaitable[T], conn: Any, deadline: float, doing: str) -> T:
    """Await a statement; at the deadline cut its connection (its state is unknown)."""
    try:
        async with asyncio.timeout(deadline):
            return await awaitable
    except TimeoutError:
        conn.close()
        raise DatabaseTimeout(
            f"{doing}: no answer from the database within {deadline:g} s"
            " (the connection was closed)"
        ) from None


class Database:
    """Ax3l's connection pool to its own database, with SELECT access to SnakeLab's.

    ``outage`` says whether the server is unreachable right now and since when: the first
    failure to connect or a dropped connection opens it, the next committed transaction
    closes it. ``disk_full`` says whether the server's disk is full: a write that failed for
    want of space (``DiskFull``) opens it, the next committed write closes it (reads go on
    working meanwhile). Reads through ``fetchone``/``fetchall`` are retried once on a fresh
    connection when a pooled one turns out dead (after a server restart); nothing else is
    retried.
    """

    def __init__(self, settings: DbSettings):
        self.settings = settings
        self._pool: aiomysql.Pool | None = None
        self._opening = asyncio.Lock()
        self._limited: weakref.WeakSet[Any] = weakref.WeakSet()
        self.snakelab = quote_identifier(settings.snakelab_db_name)
        self.outage = Outage()
        self.disk_full = DiskFullSpell()
        self.query_timeout = settings.db_query_timeout
        self.acquire_timeout = settings.db_acquire_timeout
        self._deadline = settings.db_query_timeout + CLIENT_DEADLINE_MARGIN

    def sl(self, table: str) -> str:
        """A fully qualified SnakeLab table name, e.g. ```snakelab`.`simulation_runs```."""
        return f"{self.snakelab}.{quote_identifier(table)}"

    async def open(self) -> Database:
        """Create the pool (one connection); raises a ``DatabaseError`` if that fails."""
        async with self._opening:
            if self._pool is None:
                self._pool = await self._create_pool()
        return self

    async def _create_pool(self) -> aiomysql.Pool:
        s = self.settings
        doing = f"connecting to {s.db_host}:{s.db_port}/{s.db_name}"
        try:
            async with asyncio.timeout(self.acquire_timeout):
                return await aiomysql.create_pool(
                    host=s.db_host,
                    port=s.db_port,
                    user=s.db_user,
                    password=s.db_password.get_secret_value(),
                    db=s.db_name,
                    minsize=1,
                    maxsize=s.db_pool_size,
                    pool_recycle=s.db_pool_recycle,
                    autocommit=False,
                    charset="utf8mb4",
                    connect_timeout=min(CONNECT_TIMEOUT_SECONDS, self.acquire_timeout),
                )
        except TimeoutError:
            error: DatabaseError = DatabaseTimeout(
                f"{doing}: no connection within {self.acquire_timeout:g} s"
            )
        except _DRIVER_ERRORS as exc:
            error = translate(exc, doing)
        if isinstance(error, DatabaseUnavailable):
            self.outage.begin(error)
        raise error

    async def close(self, grace: float = CLOSE_GRACE_SECONDS) -> None:
        """Close the pool: connections in use get ``grace`` seconds to come back, then are cut."""
        pool = self._pool
        if pool is not None:
            pool.close()  # from now on an acquire fails instead of opening a new pool
            try:
                await asyncio.wait_for(pool.wait_closed(), grace)
            except TimeoutError:
                log.warning(
                    "%d database connection(s) still in use after %g s; closing them",
                    pool.size - pool.freesize,
                    grace,
                )
                pool.terminate()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(pool.wait_closed(), grace)
            self._pool = None

    async def __aenter__(self) -> Database:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _acquire(self, doing: str) -> tuple[aiomysql.Pool, Any]:
        """A pooled connection with the statement limits set, within the acquire timeout."""
        if self._pool is None:
            await self.open()
        pool = self._pool
        assert pool is not None
        conn = None
        try:
            async with asyncio.timeout(self.acquire_timeout):
                conn = await pool.acquire()
                if conn not in self._limited:
                    async with conn.cursor() as cur:
                        await cur.execute(
                            session_limits(conn.get_server_info(), self.query_timeout)
                        )
                    await conn.commit()
                    self._limited.add(conn)
            return pool, conn
        except TimeoutError:
            error: DatabaseError = DatabaseTimeout(
                f"{doing}: no database connection within {self.acquire_timeout:g} s"
                f" (pool of {self.settings.db_pool_size})"
            )
        except _DRIVER_ERRORS as exc:
            error = translate(exc, doing)
        if conn is not None:
            conn.close()
            pool.release(conn)
        if isinstance(error, DatabaseUnavailable):
            self.outage.begin(error)
        raise error

    @contextlib.asynccontextmanager
    async def transaction(self, doing: str = "database transaction") -> AsyncIterator[Any]:
        """A cursor (dict rows) inside one transaction: commit on success, roll back on error.

        Each statement and the commit fail with ``DatabaseTimeout`` after the query timeout.
        """
        pool, conn = await self._acquire(doing)
        broken = False
        wrote = False
        try:
            async with conn.cursor(aiomysql.DictCursor) as cur:
                try:
                    timed = _TimedCursor(cur, conn, self._deadline, doing)
                    yield timed
                    await _bounded(conn.commit(), conn, self._deadline, doing)
                    wrote = timed.wrote
                except BaseException as exc:
                    broken = conn.closed or isinstance(exc, DatabaseTimeout)
                    if not broken:
                        try:
                            await _bounded(conn.rollback(), conn, self._deadline, doing)
                        except Exception:
                            broken = True
                    if isinstance(exc, _DRIVER_ERRORS):
                        broken = True
                        error = translate(exc, doing)
                        if isinstance(error, DiskFull):
                            self.disk_full.begin(error)
                        elif isinstance(error, DatabaseUnavailable) and not isinstance(
                            error, DatabaseTimeout
                        ):
                            self.outage.begin(error)
                        raise error from exc
                    raise
        finally:
            if broken and not conn.closed:
                conn.close()
            pool.release(conn)
        self.outage.end()
        if wrote:
            self.disk_full.end()

    async def _read(self, sql: str, args: Any, doing: str, one: bool) -> Any:
        for attempt in (1, 2):
            try:
                async with self.transaction(doing) as cur:
                    await cur.execute(sql, args)
                    return await (cur.fetchone() if one else cur.fetchall())
            except DatabaseTimeout:
                raise
            except DatabaseUnavailable:
                # A pooled connection the server dropped (it restarted) fails its first use;
                # a read is safe to repeat once on a fresh connection.
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def fetchall(
        self, sql: str, args: Any = None, doing: str = "query"
    ) -> list[dict[str, Any]]:
        return list(await self._read(sql, args, doing, one=False))

    async def fetchone(
        self, sql: str, args: Any = None, doing: str = "query"
    ) -> dict[str, Any] | None:
        row = await self._read(sql, args, doing, one=True)
        return dict(row) if row else None

    async def ping(self) -> None:
        """Raise a ``DatabaseError`` unless the database answers (the report server's wait
        for it at startup)."""
        await self.fetchone("SELECT 1 AS one", doing="reaching the database")
