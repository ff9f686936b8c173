"""Rows read straight from Ax3l's database, for tests to compare the reports against."""

from __future__ import annotations

from contextlib import closing
from typing import Any


def stored_rows(dbs: Any, sql: str, args: tuple[Any, ...] = (), user: str = "admin") -> list[Any]:
    """Every row ``sql`` selects, as tuples, logged in as ``user`` (a test databases' login)."""
    with closing(dbs.connect(user, dbs.ax3l_db)) as conn, conn.cursor() as cur:
        cur.execute(sql, args or None)
        return [tuple(row) for row in cur.fetchall()]
