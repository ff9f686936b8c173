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
from typing import Any

from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.seats import Seat, SeatError, seats_by_hash, store_seat

TOKEN_PREFIX = "ax3l-seat-"
# Seconds a failed read of the seats is not tried again (its error is raised again meanwhile).
FAILED_READ_WAIT = 1.0
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


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


def add_seat(conn: Any, name: str) -> str:
    """Create seat ``name`` (or give a revoked one a new token) on ``ax3l-seats``' blocking
    connection (``store_seat``); returns the token."""
    token = new_token()
    store_seat(conn, check_name(name), token_hash(token))
    return token


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
                        self._by_hash = await seats_by_hash(self.db)
                    except DatabaseError as exc:
                        self._failed = (started, exc)
                        raise
                    self._failed = None
                    self._read_at = started
        return Verdict(self._by_hash.get(token_hash(token)))
