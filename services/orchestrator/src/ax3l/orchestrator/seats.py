"""Seats: named outside agents that may take the turns of the ``external`` proposer.

A seat is a name and the SHA-256 of its token. The token (``ax3l-seat-`` and 256 random bits)
is shown once, when the seat is added; only its hash is stored (table ``seats``), so a copy of
the database gives nobody a working token. A revoked seat keeps its row (the event log still
names it) and its token stops working at the next request. Tokens are random, not chosen, so a
plain (fast) hash is enough: there is nothing to guess from it.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ax3l.shared.db.database import Database

TOKEN_PREFIX = "ax3l-seat-"
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


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _seat(row: Any) -> Seat:
    return Seat(str(row[0]), row[1], row[2])


# -- administration (``ax3l-seats``, a plain blocking connection) ----------------------------


def add_seat(conn: Any, name: str) -> str:
    """Create seat ``name`` (or give a revoked one a new token); returns the token."""
    check_name(name)
    token = new_token()
    with conn.cursor() as cur:
        cur.execute("SELECT revoked_at FROM seats WHERE name = %s FOR UPDATE", (name,))
        row = cur.fetchone()
        if row is not None and row[0] is None:
            raise SeatError(f"seat {name!r} exists; revoke it first to give it a new token")
        cur.execute(
            "INSERT INTO seats (name, token_hash, created_at, revoked_at)"
            " VALUES (%s, %s, %s, NULL) ON DUPLICATE KEY UPDATE token_hash = VALUES(token_hash),"
            " created_at = VALUES(created_at), revoked_at = NULL",
            (name, token_hash(token), _now()),
        )
    return token


def list_seats(conn: Any) -> list[Seat]:
    with conn.cursor() as cur:
        cur.execute("SELECT name, created_at, revoked_at FROM seats ORDER BY name")
        return [_seat(row) for row in cur.fetchall()]


def revoke_seat(conn: Any, name: str) -> Seat:
    """Revoke seat ``name`` (its token stops working at once); returns it."""
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE seats SET revoked_at = %s WHERE name = %s AND revoked_at IS NULL",
            (_now(), name),
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
    """Looks presented tokens up by their hash; every request asks, so a revoke is immediate."""

    def __init__(self, db: Database):
        self.db = db

    async def verify(self, token: str) -> Verdict:
        row = await self.db.fetchone(
            "SELECT name, created_at, revoked_at FROM seats WHERE token_hash = %s",
            (token_hash(token),),
            doing="checking a seat token",
        )
        if row is None:
            return Verdict(None)
        seat = Seat(str(row["name"]), row["created_at"], row["revoked_at"])
        return Verdict(seat)
