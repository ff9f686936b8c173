"""Seats: named outside agents that may take the turns of the ``external`` proposer.

A seat is a name and the SHA-256 of its token. The token (``ax3l-seat-`` and 256 random bits)
is shown once, when the seat is added; only its hash is stored (table ``seats``), so a copy of
the database gives nobody a working token. A revoked seat keeps its row (the event log still
names it). The endpoint checks tokens against an in-memory copy of the table that it reads
again when it is ``AX3L_SEAT_TOKEN_REFRESH`` seconds old (5 by default), so a revoked token stops
working, and a new seat's token starts working, within that bound; no request ever reads the
database for its token beyond that one read per interval. Tokens are random, not chosen, so a
plain (fast) hash is enough: there is nothing to guess from it.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pymysql

from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.intents import now

TOKEN_PREFIX = "ax3l-seat-"
# Seconds a failed read of the seats is not tried again (its error is raised again meanwhile).
FAILED_READ_WAIT = 1.0
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class SeatError(ValueError):
    """A seat command that cannot be done (bad name, name taken, no such seat)."""


@dataclass(frozen=True)
class Seat:
    """A seat as stored (never its token)."""

    name: str
    created_at: datetime
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise SeatError(
            f"{name!r} is not a seat name: 1-64 letters, digits, '.', '_' or '-', starting with a"
            " letter or digit"
        )
    return name


def _seat(row: Any) -> Seat:
    return Seat(str(row[0]), row[1], row[2])


# -- administration (``ax3l-seats``, a plain blocking connection) ----------------------------


def add_seat(conn: Any, name: str) -> str:
    """Create seat ``name`` (or give a revoked one a new token); returns the token.

    One transaction, whatever the connection's autocommit: the row is locked (``FOR UPDATE``)
    before it is checked, so of two concurrent adds of one name exactly one succeeds and the
    other is told the seat exists (a deadlock between the two is retried once)."""
    check_name(name)
    for attempt in (1, 2):
        try:
            return _add_seat_once(conn, name)
        except pymysql.err.OperationalError as exc:
            if attempt == 2 or exc.args[0] not in (1205, 1213):  # lock wait, deadlock
                raise
    raise AssertionError("unreachable")


def _add_seat_once(conn: Any, name: str) -> str:
    token = new_token()
    conn.begin()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT revoked_at FROM seats WHERE name = %s FOR UPDATE", (name,))
            row = cur.fetchone()
            if row is not None and row[0] is None:
                raise SeatError(f"seat {name!r} exists; revoke it first to give it a new token")
            if row is None:
                try:
                    cur.execute(
                        "INSERT INTO seats (name, token_hash, created_at, revoked_at)"
                        " VALUES (%s, %s, %s, NULL)",
                        (name, token_hash(token), now()),
                    )
                except pymysql.err.IntegrityError as exc:
                    raise SeatError(f"seat {name!r} exists (added just now)") from exc
            else:
                cur.execute(
                    "UPDATE seats SET token_hash = %s, created_at = %s, revoked_at = NULL"
                    " WHERE name = %s AND revoked_at IS NOT NULL",
                    (token_hash(token), now(), name),
                )
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return token


def list_seats(conn: Any) -> list[Seat]:
    with conn.cursor() as cur:
        cur.execute("SELECT name, created_at, revoked_at FROM seats ORDER BY name")
        return [_seat(row) for row in cur.fetchall()]


def revoke_seat(conn: Any, name: str) -> Seat:
    """Revoke seat ``name`` (its token stops working within the endpoint's
    ``AX3L_SEAT_TOKEN_REFRESH`` seconds); returns it."""
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE seats SET revoked_at = %s WHERE name = %s AND revoked_at IS NULL",
            (now(), name),
        )
        cur.execute("SELECT name, created_at, revoked_at FROM seats WHERE name = %s", (name,))
        row = cur.fetchone()
    if row is None:
        raise SeatError(f"there is no seat {name!r}")
    return _seat(row)


# -- verification (the seat endpoint) ---------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What a presented token is: a seat (active or revoked), or nobody's (``seat`` None)."""

    seat: Seat | None

    @property
    def allowed(self) -> bool:
        return self.seat is not None and self.seat.active


class SeatDirectory:
    """Looks presented tokens up by their hash in an in-memory copy of ``seats``, read again
    when it is ``refresh`` seconds old (one read at a time), so a revoke takes effect within
    ``refresh`` seconds and a flood of unknown tokens costs one database read per interval."""

    def __init__(
        self, db: Database, refresh: float = 5.0, clock: Callable[[], float] = time.monotonic
    ):
        self.db = db
        self.refresh = refresh
        self.clock = clock
        self._by_hash: dict[str, Seat] = {}
        self._read_at: float | None = None
        self._failed: tuple[float, DatabaseError] | None = None
        self._lock = asyncio.Lock()

    async def _load(self) -> None:
        rows = await self.db.fetchall(
            "SELECT name, token_hash, created_at, revoked_at FROM seats",
            doing="reading the seats",
        )
        self._by_hash = {
            str(row["token_hash"]): Seat(str(row["name"]), row["created_at"], row["revoked_at"])
            for row in rows
        }

    def _fresh(self) -> bool:
        return self._read_at is not None and self.clock() - self._read_at < self.refresh

    async def verify(self, token: str) -> Verdict:
        """The seat of ``token`` as of at most ``refresh`` seconds ago (``DatabaseError`` when
        the copy is older and the table cannot be read: no stale answer is ever given). A read
        that failed is not tried again for ``FAILED_READ_WAIT`` seconds (its error is raised
        again), so a flood of tokens while the database is away costs it nothing either."""
        if not self._fresh():
            async with self._lock:
                if not self._fresh():
                    started = self.clock()
                    failed = self._failed
                    if failed is not None and started - failed[0] < FAILED_READ_WAIT:
                        raise failed[1]
                    try:
                        await self._load()
                    except DatabaseError as exc:
                        self._failed = (started, exc)
                        raise
                    self._failed = None
                    self._read_at = started
        return Verdict(self._by_hash.get(token_hash(token)))
