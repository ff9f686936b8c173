"""The one database context: a recycling aiomysql pool, transactions, domain errors."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiomysql
import pymysql

from ax3l.shared.db.errors import DatabaseError, translate
from ax3l.shared.settings import Settings

log = logging.getLogger(__name__)

# How long closing waits for connections still in use before it cuts them.
CLOSE_GRACE_SECONDS = 5.0


def quote_identifier(name: str) -> str:
    """A MySQL identifier in backquotes (database names come from settings)."""
    if not name or "\x00" in name or len(name) > 64:
        raise ValueError(f"invalid identifier {name!r}")
    return "`" + name.replace("`", "``") + "`"


class Database:
    """Ax3l's connection pool to its own database, with SELECT access to SnakeLab's."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._pool: aiomysql.Pool | None = None
        self.snakelab = quote_identifier(settings.snakelab_db_name)

    def sl(self, table: str) -> str:
        """A fully qualified SnakeLab table name, e.g. ```snakelab`.`simulation_runs```."""
        return f"{self.snakelab}.{quote_identifier(table)}"

    async def open(self) -> Database:
        if self._pool is None:
            s = self.settings
            try:
                self._pool = await aiomysql.create_pool(
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
                    connect_timeout=10,
                )
            except (pymysql.err.MySQLError, OSError) as exc:
                raise translate(exc, f"connecting to {s.db_host}:{s.db_port}/{s.db_name}") from exc
        return self

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

    @contextlib.asynccontextmanager
    async def transaction(self, doing: str = "database transaction") -> AsyncIterator[Any]:
        """A cursor (dict rows) inside one transaction: commit on success, roll back on error."""
        if self._pool is None:
            await self.open()
        assert self._pool is not None
        try:
            conn = await self._pool.acquire()
        except (pymysql.err.MySQLError, OSError) as exc:
            raise translate(exc, doing) from exc
        broken = False
        try:
            async with conn.cursor(aiomysql.DictCursor) as cur:
                try:
                    yield cur
                    await conn.commit()
                except BaseException as exc:
                    try:
                        await conn.rollback()
                    except Exception:
                        broken = True
                    if isinstance(exc, (pymysql.err.MySQLError, OSError)):
                        broken = True
                        raise translate(exc, doing) from exc
                    raise
        finally:
            if broken:
                conn.close()
            self._pool.release(conn)

    async def fetchall(self, sql: str, args: Any = None, doing: str = "query") -> list[dict]:
        async with self.transaction(doing) as cur:
            await cur.execute(sql, args)
            return list(await cur.fetchall())

    async def fetchone(self, sql: str, args: Any = None, doing: str = "query") -> dict | None:
        async with self.transaction(doing) as cur:
            await cur.execute(sql, args)
            row = await cur.fetchone()
            return dict(row) if row else None

    async def ping(self) -> None:
        """Raise a DatabaseError unless both databases answer."""
        row = await self.fetchone(
            f"SELECT COUNT(*) AS n FROM {self.sl('simulation_runs')} WHERE 0=1",
            doing="checking the databases",
        )
        if row is None:
            raise DatabaseError("checking the databases: no answer")
