"""The seats' store on a real database: a seat added, refused again while active, revoked,
given a new token, listed by name and read by its token's hash."""

from __future__ import annotations

from contextlib import closing

import pytest

from ax3l.shared.db.database import Database
from ax3l.shared.db.seats import SeatError, list_seats, revoke_seat, seats_by_hash, store_seat
from ax3l.testing.databases import TestDatabases


async def test_a_seat_is_added_revoked_and_given_a_new_hash(databases: TestDatabases) -> None:
    with closing(databases.connect("ax3l", databases.ax3l_db)) as conn:
        store_seat(conn, "bob", "b" * 64)
        store_seat(conn, "alice", "a" * 64)
        with pytest.raises(SeatError, match="'bob' exists; revoke it first"):
            store_seat(conn, "bob", "c" * 64)
        revoked = revoke_seat(conn, "bob")
        assert revoked.name == "bob" and not revoked.active
        with pytest.raises(SeatError, match="there is no seat 'carol'"):
            revoke_seat(conn, "carol")
        store_seat(conn, "bob", "c" * 64)
        assert [(s.name, s.active) for s in list_seats(conn)] == [("alice", True), ("bob", True)]
    async with Database(databases.settings()) as db:
        by_hash = await seats_by_hash(db)
    assert {h: s.name for h, s in by_hash.items()} == {"a" * 64: "alice", "c" * 64: "bob"}
