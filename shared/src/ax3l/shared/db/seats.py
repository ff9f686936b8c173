"""The seats (table ``seats``): a name and the SHA-256 of its token, never the token.

``ax3l-seats`` adds (or gives a revoked seat a new token), lists and revokes them on a blocking
connection of its own; the seats' endpoint reads every seat by its token's hash
(``seats_by_hash``). A revoked seat keeps its row: the event log still names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pymysql

from ax3l.shared.db.database import Database
from ax3l.shared.db.intents import now

SEAT_COLUMNS = "name, created_at, revoked_at"


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


def _seat(row: Any) -> Seat:
    return Seat(str(row[0]), row[1], row[2])


def store_seat(conn: Any, name: str, token_hash: str) -> None:
    """Create seat ``name`` with ``token_hash``, or give a revoked one that hash (``SeatError``
    when it is active).

    One transaction, whatever the connection's autocommit: the row is locked (``FOR UPDATE``)
    before it is checked, so of two concurrent adds of one name exactly one succeeds and the
    other is told the seat exists (a deadlock between the two is retried once)."""
    for attempt in (1, 2):
        try:
            _store_once(conn, name, token_hash)
            return
        except pymysql.err.OperationalError as exc:
            if attempt == 2 or exc.args[0] not in (1205, 1213):  # lock wait, deadlock
                raise


def _store_once(conn: Any, name: str, token_hash: str) -> None:
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
                        (name, token_hash, now()),
                    )
                except pymysql.err.IntegrityError as exc:
                    raise SeatError(f"seat {name!r} exists (added just now)") from exc
            else:
                cur.execute(
                    "UPDATE seats SET token_hash = %s, created_at = %s, revoked_at = NULL"
                    " WHERE name = %s AND revoked_at IS NOT NULL",
                    (token_hash, now(), name),
                )
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


def list_seats(conn: Any) -> list[Seat]:
    """Every seat, by name."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT {SEAT_COLUMNS} FROM seats ORDER BY name")
        return [_seat(row) for row in cur.fetchall()]


def revoke_seat(conn: Any, name: str) -> Seat:
    """Revoke seat ``name`` (``SeatError`` when there is none); returns it."""
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE seats SET revoked_at = %s WHERE name = %s AND revoked_at IS NULL",
            (now(), name),
        )
        cur.execute(f"SELECT {SEAT_COLUMNS} FROM seats WHERE name = %s", (name,))
        row = cur.fetchone()
    if row is None:
        raise SeatError(f"there is no seat {name!r}")
    return _seat(row)


async def seats_by_hash(db: Database) -> dict[str, Seat]:
    """Every seat by its token's hash: the seats' endpoint's in-memory copy."""
    rows = await db.fetchall(
        f"SELECT token_hash, {SEAT_COLUMNS} FROM seats", doing="reading the seats"
    )
    return {
        str(row["token_hash"]): Seat(str(row["name"]), row["created_at"], row["revoked_at"])
        for row in rows
    }
