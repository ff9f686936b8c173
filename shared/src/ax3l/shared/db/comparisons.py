"""The proposer comparisons' tables (``comparisons``, ``comparison_repeats``,
``comparison_retests``): ``ax3l-compare`` writes them and reads its results back on a blocking
connection of its own; the report server's ``/comparison`` reads them (``Comparisons``).

The JSON columns (``content``, ``best_so_far``, ``failed_run_ids``) are written from Python
values and read back as the stored text. A database whose tables predate the comparison has
none: ``Comparisons`` reads it as empty and never creates tables.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict, cast

import pymysql

from ax3l.shared.db.database import Database, tables_present
from ax3l.shared.db.intents import now

REPEATS = (
    "SELECT proposer, repeat_index, seed, state, runs, best_score, best_so_far,"
    " accepted_proposals, model_turns, wasted_turns, wall_seconds, content"
    " FROM comparison_repeats WHERE comparison_id = %s ORDER BY proposer, repeat_index"
)
RETESTS = (
    "SELECT proposer, repeat_index, at_runs, seed, run_id, score, failed_run_ids"
    " FROM comparison_retests WHERE comparison_id = %s"
    " ORDER BY proposer, repeat_index, at_runs, seed"
)


class StoredComparison(TypedDict):
    """A row of ``comparisons``: one ``ax3l-compare`` invocation."""

    comparison_id: int
    started_at: datetime
    finished_at: datetime | None
    state: str
    proposers: str  # comma-separated
    repeats: int
    budget: int
    wall_seconds: float | None
    content: str


class StoredRepeat(TypedDict):
    """A row of ``comparison_repeats`` (``REPEATS``' columns): one proposer's experiment."""

    proposer: str
    repeat_index: int
    seed: int
    state: str
    runs: int
    best_score: int | None
    best_so_far: str
    accepted_proposals: int
    model_turns: int
    wasted_turns: int
    wall_seconds: float
    content: str


class StoredRetest(TypedDict):
    """A row of ``comparison_retests`` (``RETESTS``' columns): one held-out seed of a
    recommendation."""

    proposer: str
    repeat_index: int
    at_runs: int
    seed: int
    run_id: str | None
    score: int | None
    failed_run_ids: str


@dataclass(frozen=True)
class NewRepeat:
    """A finished repeat as ``add_repeat`` writes it (its JSON columns as Python values)."""

    proposer: str
    repeat_index: int
    seed: int
    state: str
    runs: int
    best_score: int | None
    best_so_far: list[int | None]
    accepted_proposals: int
    model_turns: int
    wasted_turns: int
    wall_seconds: float
    content: dict[str, Any]


@dataclass(frozen=True)
class NewRetest:
    """One held-out seed of a repeat's recommendation after ``at_runs`` runs."""

    at_runs: int
    seed: int
    run_id: str | None
    score: int | None
    failed_run_ids: list[str]


class Comparisons:
    """The comparisons as the report server reads them (``db``: Ax3l's database)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def _present(self, *names: str) -> bool:
        wanted = names or ("comparisons", "comparison_repeats")
        return await tables_present(self.db, wanted, "looking for the comparison tables")

    async def all(self) -> list[StoredComparison]:
        """Every comparison, newest first (none without the tables)."""
        if not await self._present():
            return []
        rows = await self.db.fetchall(
            "SELECT comparison_id, started_at, finished_at, state, proposers, repeats, budget,"
            " wall_seconds, content FROM comparisons ORDER BY comparison_id DESC",
            doing="reading the comparisons",
        )
        return cast("list[StoredComparison]", rows)

    async def repeats(self, comparison_id: int) -> list[StoredRepeat]:
        """The comparison's repeats by proposer and index."""
        rows = await self.db.fetchall(
            REPEATS, (comparison_id,), doing="reading a comparison's repeats"
        )
        return cast("list[StoredRepeat]", rows)

    async def retests(self, comparison_id: int) -> list[StoredRetest]:
        """The comparison's held-out re-tests (none in a database from before them)."""
        if not await self._present("comparison_retests"):
            return []
        rows = await self.db.fetchall(
            RETESTS, (comparison_id,), doing="reading a comparison's re-tests"
        )
        return cast("list[StoredRetest]", rows)


# -- ``ax3l-compare``: a blocking autocommit connection of its own ----------------------------


def create_comparison(
    conn: Any, proposers: Sequence[str], repeats: int, budget: int, content: dict[str, Any]
) -> int:
    """A new ``running`` comparison's row; returns its id."""
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO comparisons (started_at, state, proposers, repeats, budget, content)"
            " VALUES (%s, 'running', %s, %s, %s, %s)",
            (now(), ",".join(proposers), repeats, budget, json.dumps(content, sort_keys=True)),
        )
        return int(cur.lastrowid)


def add_repeat(
    conn: Any, comparison_id: int, repeat: NewRepeat, retests: Sequence[NewRetest]
) -> None:
    """The repeat's row and its re-tests' rows (on an autocommit ``conn`` a repeat is stored
    whole or, on a database error, partly)."""
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO comparison_repeats (comparison_id, proposer, repeat_index, seed, state,"
            " runs, best_score, best_so_far, accepted_proposals, model_turns, wasted_turns,"
            " wall_seconds, finished_at, content)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                comparison_id,
                repeat.proposer,
                repeat.repeat_index,
                repeat.seed,
                repeat.state,
                repeat.runs,
                repeat.best_score,
                json.dumps(repeat.best_so_far),
                repeat.accepted_proposals,
                repeat.model_turns,
                repeat.wasted_turns,
                round(repeat.wall_seconds, 3),
                now(),
                json.dumps(repeat.content, sort_keys=True),
            ),
        )
        rows = [
            (
                comparison_id,
                repeat.proposer,
                repeat.repeat_index,
                retest.at_runs,
                retest.seed,
                retest.run_id,
                retest.score,
                json.dumps(retest.failed_run_ids),
            )
            for retest in retests
        ]
        if rows:
            cur.executemany(
                "INSERT INTO comparison_retests (comparison_id, proposer, repeat_index, at_runs,"
                " seed, run_id, score, failed_run_ids) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                rows,
            )


def finish_comparison(conn: Any, comparison_id: int, state: str, wall_seconds: float) -> None:
    """Mark the comparison ``state`` (finished, partial, failed) after ``wall_seconds``."""
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE comparisons SET state = %s, finished_at = %s, wall_seconds = %s"
            " WHERE comparison_id = %s",
            (state, now(), round(wall_seconds, 3), comparison_id),
        )


def _dict_rows(conn: Any, sql: str, comparison_id: int) -> list[dict[str, Any]]:
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(sql, (comparison_id,))
        return list(cur.fetchall())


def repeat_rows(conn: Any, comparison_id: int) -> list[StoredRepeat]:
    """``Comparisons.repeats`` on ``ax3l-compare``'s connection."""
    return cast("list[StoredRepeat]", _dict_rows(conn, REPEATS, comparison_id))


def retest_rows(conn: Any, comparison_id: int) -> list[StoredRetest]:
    """``Comparisons.retests`` on ``ax3l-compare``'s connection (the table must exist)."""
    return cast("list[StoredRetest]", _dict_rows(conn, RETESTS, comparison_id))


def finished_repeats(conn: Any, comparison_id: int) -> list[dict[str, Any]]:
    """``proposer, repeat_index, best_score, content`` and the comparison's ``budget`` of its
    finished repeats, by proposer and index."""
    return _dict_rows(
        conn,
        "SELECT r.proposer, r.repeat_index, r.best_score, r.content, c.budget"
        " FROM comparison_repeats r JOIN comparisons c USING (comparison_id)"
        " WHERE r.comparison_id = %s AND r.state = 'finished'"
        " ORDER BY r.proposer, r.repeat_index",
        comparison_id,
    )


def held_out_means(conn: Any, comparison_id: int) -> dict[tuple[str, int], float]:
    """Per ``(proposer, repeat_index)``, the mean held-out score (MariaDB's ``AVG``) of its
    final recommendation (the one after the budget's runs)."""
    rows = _dict_rows(
        conn,
        "SELECT r.proposer, r.repeat_index, AVG(r.score) AS mean FROM comparison_retests r"
        " JOIN comparisons c USING (comparison_id) WHERE r.comparison_id = %s"
        " AND r.at_runs = c.budget AND r.score IS NOT NULL"
        " GROUP BY r.proposer, r.repeat_index",
        comparison_id,
    )
    return {(row["proposer"], int(row["repeat_index"])): float(row["mean"]) for row in rows}
