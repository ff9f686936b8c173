"""Every read of SnakeLab's tables, in one place: ``SnakeLabRuns`` (and, for blocking callers
with a cursor of their own, the functions at the end).

SnakeLab owns ``simulation_runs``, ``configurations`` and ``simulation_episodes`` (Ax3l has
SELECT only; ``ax3l.shared.db.tables`` describes them); their columns are SnakeLab's contract
and are named nowhere else in product code (``tests/test_structure.py`` checks it, with the
modules still to move listed there). Statements are MariaDB text: short, and nothing to
compile on the hot paths (the report pages, ``/metrics``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db import tables
from ax3l.shared.db.database import Database, grouped_lines, placeholders, quote_identifier
from ax3l.shared.db.errors import DatabaseError

RUN_COLUMNS = (
    "r.id, r.run_id, r.project_version, r.config_hash, r.status, r.episode_count,"
    " r.high_score, r.created_at, r.started_at, r.completed_at, r.error_message"
)


SEPARATOR = "\x1f"  # ASCII unit separator: in no run id, state, time or number


def line_of(columns: Sequence[str]) -> str:
    """One text value of a row: its ``columns`` joined by ``SEPARATOR`` (NULL as empty). The
    driver decodes one value a row several times faster than 17; doubles print exactly."""
    fields = ", ".join(f"COALESCE({column}, '')" for column in columns)
    return f"CONCAT_WS(CHAR({ord(SEPARATOR)}), {fields})"


def optional_int(value: Any) -> int | None:
    """A nullable integer column's value as an int or None."""
    return None if value is None else int(value)


@dataclass(frozen=True)
class SeedSummary:
    """A seed's runs: how many, how many completed with a score, and the best (None: none)."""

    seed: int
    runs: int
    completed: int
    best: int | None


class SnakeLabRuns:
    """SnakeLab's runs, configurations and episodes as Ax3l reads them (``db``'s SnakeLab)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.runs = db.sl("simulation_runs")
        self.configurations = db.sl("configurations")
        self.episodes_table = db.sl("simulation_episodes")

    async def count(self, cur: Any = None) -> int:
        """SnakeLab's total number of runs, any status, repeats included (inside the caller's
        transaction when ``cur``, its cursor, is given)."""
        sql = f"SELECT COUNT(*) AS n FROM {self.runs}"
        if cur is None:
            row = await self.db.fetchone(sql, doing="counting simulations")
        else:
            await cur.execute(sql)
            row = await cur.fetchone()
        return int(row["n"]) if row else 0

    async def with_config(self, schema: ConfigSchema, run_id: str) -> dict[str, Any] | None:
        """A run's row plus its nested ``config``, or None if SnakeLab has no such run."""
        columns = ", ".join(f"c.{column}" for column in schema.columns)
        row = await self.db.fetchone(
            f"SELECT {RUN_COLUMNS}, {columns} FROM {self.runs} r"
            f" JOIN {self.configurations} c ON c.run_id = r.run_id WHERE r.run_id = %s",
            (run_id,),
            doing=f"reading run {run_id}",
        )
        if row is None:
            return None
        flat = {column: row.pop(column) for column in schema.columns}
        row["config"] = schema.unflatten(flat)
        return row

    async def attempts(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        """``id, run_id, status, high_score, episode_count, error_message`` of ``run_ids``, in
        submission order."""
        if not run_ids:
            return []
        return await self.db.fetchall(
            "SELECT id, run_id, status, high_score, episode_count, error_message"
            f" FROM {self.runs} WHERE run_id IN ({placeholders(run_ids)}) ORDER BY id",
            list(run_ids),
            doing="reading the attempts at a configuration",
        )

    async def newest_usable(self, run_ids: Sequence[str], unusable: Sequence[str]) -> str | None:
        """The newest of ``run_ids`` not in ``unusable`` states and not completed without a
        high score, or None."""
        if not run_ids:
            return None
        row = await self.db.fetchone(
            f"SELECT run_id FROM {self.runs} WHERE run_id IN ({placeholders(run_ids)})"
            f" AND status NOT IN ({placeholders(unusable)})"
            " AND NOT (status = 'completed' AND high_score IS NULL)"
            " ORDER BY id DESC LIMIT 1",
            (*run_ids, *unusable),
            doing="looking for a usable run of a configuration",
        )
        return None if row is None else str(row["run_id"])

    async def matching(
        self, equal: Mapping[str, Any], columns: Sequence[str], doing: str
    ) -> list[dict[str, Any]]:
        """``run_id, status, high_score`` and ``columns`` of every run whose configuration has
        the given value in each column of ``equal``, in submission order.

        The comparison happens in SQL, exactly: integers as integers, and numbers as DOUBLEs
        against the float sent as a double literal (pymysql writes ``repr(x)e0``), which parses
        back to that very float; so only matching rows leave the server.
        """
        where = " AND ".join(f"c.{column} = %s" for column in equal) or "1 = 1"
        wanted = ", ".join(f"c.{column}" for column in columns)
        return await self.db.fetchall(
            f"SELECT r.run_id, r.status, r.high_score, {wanted}"
            f" FROM {self.runs} r JOIN {self.configurations} c"
            f" ON c.run_id = r.run_id WHERE {where} ORDER BY r.id",
            list(equal.values()),
            doing=doing,
        )

    async def ping(self) -> None:
        """Raise a DatabaseError unless both databases answer (Ax3l's login reads SnakeLab's)."""
        row = await self.db.fetchone(
            f"SELECT COUNT(*) AS n FROM {self.runs} WHERE 0=1", doing="checking the databases"
        )
        if row is None:
            raise DatabaseError("checking the databases: no answer")

    async def run(self, run_id: str) -> dict[str, Any] | None:
        """A run's row with its best game (``high_score_snapshot``), or None."""
        return await self.db.fetchone(
            f"SELECT {RUN_COLUMNS}, r.high_score_snapshot FROM {self.runs} r WHERE r.run_id = %s",
            (run_id,),
            doing=f"reading run {run_id}",
        )

    async def flat_config(self, run_id: str) -> dict[str, Any] | None:
        """A run's ``configurations`` row without ``run_id`` (whatever columns it has), or None."""
        flat = await self.db.fetchone(
            f"SELECT * FROM {self.configurations} WHERE run_id = %s",
            (run_id,),
            doing=f"reading the configuration of run {run_id}",
        )
        if flat is not None:
            flat.pop("run_id", None)
        return flat

    async def episodes(self, *run_ids: str) -> dict[str, list[dict[str, Any]]]:
        """``episode, score, steps, epsilon, loss`` of each run's episodes, in order, by run."""
        found: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in run_ids}
        if run_ids:
            rows = await self.db.fetchall(
                f"SELECT run_id, episode, score, steps, epsilon, loss FROM {self.episodes_table}"
                f" WHERE run_id IN ({placeholders(run_ids)}) ORDER BY run_id, episode",
                run_ids,
                doing="reading episodes",
            )
            for row in rows:
                found[row.pop("run_id")].append(row)
        return found

    async def mean_scores(self, run_ids: Sequence[str], points: int) -> dict[str, list[float]]:
        """Each run's learning curve: its episodes cut into ``points`` equal spans (by its
        last episode) and the mean score of each, rounded to 2 places; runs without any left
        out."""
        episodes = self.episodes_table
        rows = await self.db.fetchall(
            "SELECT e.run_id, FLOOR((e.episode - 1) * %s / n.episodes) AS b,"
            f" AVG(e.score) AS score FROM {episodes} e JOIN (SELECT run_id,"
            f" MAX(episode) AS episodes FROM {episodes} WHERE run_id IN ({placeholders(run_ids)})"
            f" GROUP BY run_id) n ON n.run_id = e.run_id WHERE e.run_id IN"
            f" ({placeholders(run_ids)}) GROUP BY e.run_id, b ORDER BY e.run_id, b",
            (points, *run_ids, *run_ids),
            doing="reading learning curves",
        )
        lines: dict[str, list[float]] = {}
        for row in rows:
            lines.setdefault(row["run_id"], []).append(round(float(row["score"]), 2))
        return lines

    async def completed_scores(self, run_ids: Sequence[str]) -> dict[str, int | None]:
        """The high score of each completed run of ``run_ids`` (1,000 run ids a statement)."""
        scores: dict[str, int | None] = {}
        for start in range(0, len(run_ids), 1000):
            chunk = run_ids[start : start + 1000]
            rows = await self.db.fetchall(
                f"SELECT run_id, high_score FROM {self.runs}"
                f" WHERE run_id IN ({placeholders(chunk)}) AND status = 'completed'",
                chunk,
                doing="reading proposal scores",
            )
            scores.update((row["run_id"], optional_int(row["high_score"])) for row in rows)
        return scores

    async def heads(
        self, ids: Sequence[int] = (), after: int = 0, limit: int = 0
    ) -> list[dict[str, Any]]:
        """``id, run_id, status, high_score`` of the runs with the given ``id``s, or else of
        the first ``limit`` with ``id`` above ``after``, by ``id``."""
        where = f"id IN ({placeholders(ids)})" if ids else "id > %s ORDER BY id LIMIT %s"
        return await self.db.fetchall(
            f"SELECT id, run_id, status, high_score FROM {self.runs} WHERE {where}",
            list(ids) if ids else (after, limit),
            doing="reading proposal scores",
        )

    def _qualified(self, names: Sequence[str]) -> list[str]:
        return [f"{'r' if name in tables.SIMULATION_RUNS.c else 'c'}.{name}" for name in names]

    async def lines(
        self, columns: Sequence[str], ids: Sequence[int] = (), after: int = 0, limit: int = 0
    ) -> list[dict[str, Any]]:
        """``id`` and ``line`` (``line_of`` the run's or its configuration's ``columns``) of the
        runs with the given ``id``s, or else of the first ``limit`` with ``id`` above ``after``,
        by ``id``."""
        where = f"r.id IN ({placeholders(ids)})" if ids else "r.id > %s"
        return await self.db.fetchall(
            f"SELECT r.id, {line_of(self._qualified(columns))} AS line FROM {self.runs} r"
            f" LEFT JOIN {self.configurations} c ON c.run_id = r.run_id WHERE {where}"
            + (" ORDER BY r.id" if ids else " ORDER BY r.id LIMIT %s"),
            list(ids) if ids else (after, limit),
            doing="reading runs",
        )

    async def every_line(self, columns: Sequence[str], configurations: bool = False) -> list[str]:
        """``line_of`` ``columns`` of every run (by ``id``), or of every configuration (by
        ``run_id``), in ``grouped_lines`` blocks joined by newlines: a scan in key order."""
        table, key = (self.configurations, "run_id") if configurations else (self.runs, "id")
        return await grouped_lines(
            self.db, f"SELECT {key} AS k, {line_of(columns)} AS line FROM {table}", "k", None, "\n"
        )

    async def status(self, run_id: str) -> tuple[str, int | None] | None:
        """A run's status and high score, or None if SnakeLab has no such run."""
        row = await self.db.fetchone(
            f"SELECT status, high_score FROM {self.runs} WHERE run_id = %s",
            (run_id,),
            doing=f"reading the status of run {run_id}",
        )
        if row is None:
            return None
        return str(row["status"]), optional_int(row["high_score"])

    async def in_order(self, offset: int, limit: int) -> list[tuple[str, str]]:
        """``(run_id, status)`` of the runs after the first ``offset``, in submission order."""
        rows = await self.db.fetchall(
            f"SELECT run_id, status FROM {self.runs} ORDER BY id LIMIT %s OFFSET %s",
            (limit, offset),
            doing=f"reading the runs after the first {offset}",
        )
        return [(str(row["run_id"]), str(row["status"])) for row in rows]

    async def hosts(self, run_ids: Sequence[str]) -> dict[str, int]:
        """How many of ``run_ids`` each SnakeLab host ran (``simulation_runs.host``)."""
        if not run_ids:
            return {}
        rows = await self.db.fetchall(
            f"SELECT host, COUNT(*) AS n FROM {self.runs}"
            f" WHERE run_id IN ({placeholders(run_ids)}) GROUP BY host ORDER BY host",
            tuple(run_ids),
            doing="reading the runs' hosts",
        )
        return {str(row["host"]): int(row["n"]) for row in rows}

    async def durations(self, newest: int) -> list[tuple[str, int, int]]:
        """``(run_id, microseconds it ran, microseconds since it ended)`` of the ``newest``
        completed runs (by submission) that have both times."""
        rows = await self.db.fetchall(
            "SELECT run_id, TIMESTAMPDIFF(MICROSECOND, started_at, completed_at) AS took,"
            " TIMESTAMPDIFF(MICROSECOND, completed_at, UTC_TIMESTAMP(6)) AS since"
            f" FROM {self.runs} WHERE status = 'completed'"
            " AND started_at IS NOT NULL AND completed_at IS NOT NULL"
            " ORDER BY id DESC LIMIT %s",
            (newest,),
            doing="measuring run times",
        )
        return [(str(r["run_id"]), int(r["took"]), int(r["since"])) for r in rows]

    async def mark(self) -> tuple[int, Any]:
        """The run count and the first run's id (None when empty): what tables kept in memory
        compare to notice an emptied or recreated ``simulation_runs``."""
        row = await self.db.fetchone(
            f"SELECT COUNT(*) AS n, (SELECT run_id FROM {self.runs} ORDER BY id LIMIT 1)"
            f" AS first_run FROM {self.runs}",
            doing="counting runs",
        )
        return (0, None) if row is None else (int(row["n"]), row["first_run"])

    async def score_counts(self, status: str | None, seed: int | None) -> list[tuple[int, int]]:
        """``(high score, runs)`` per high score reached, ascending (runs without one left out),
        of the runs in ``status`` on ``seed`` (None: any)."""
        clauses, args, join = ["r.high_score IS NOT NULL"], list[Any](), ""
        if status is not None:
            clauses.append("r.status = %s")
            args.append(status)
        if seed is not None:
            join = f" JOIN {self.configurations} c ON c.run_id = r.run_id"
            clauses.append("c.seed = %s")
            args.append(seed)
        rows = await self.db.fetchall(
            f"SELECT r.high_score AS score, COUNT(*) AS runs FROM {self.runs} r{join}"
            f" WHERE {' AND '.join(clauses)} GROUP BY r.high_score ORDER BY r.high_score",
            args,
            doing="reading the score distribution",
        )
        return [(int(row["score"]), int(row["runs"])) for row in rows]

    async def seeds(self) -> list[int]:
        """The seeds SnakeLab has runs for, ascending."""
        rows = await self.db.fetchall(
            f"SELECT DISTINCT seed FROM {self.configurations} ORDER BY seed",
            doing="reading seeds",
        )
        return [int(row["seed"]) for row in rows]

    async def newest_id(self) -> int | None:
        """The newest run's ``id`` (None when there is none)."""
        row = await self.db.fetchone(
            f"SELECT MAX(id) AS id FROM {self.runs}", doing="counting runs"
        )
        return None if row is None else optional_int(row["id"])

    async def newest_and_first_open(
        self, after: int, terminal: Collection[str]
    ) -> tuple[int | None, int | None]:
        """Among the runs with ``id`` above ``after``: the newest ``id`` and the oldest of a run
        whose status is not in ``terminal`` (each None when there is none)."""
        row = await self.db.fetchone(
            f"SELECT MAX(id) AS newest, MIN(CASE WHEN status NOT IN ({placeholders(terminal)})"
            f" THEN id END) AS open FROM {self.runs} WHERE id > %s",
            (*sorted(terminal), after),
            doing="counting runs",
        )
        return (
            (None, None)
            if row is None
            else (optional_int(row["newest"]), optional_int(row["open"]))
        )

    async def counts_by_status(self, after: int, through: int | None) -> list[tuple[str, int]]:
        """``(status, runs)`` of the runs with ``after < id <= through`` (None: no upper end)."""
        upper = "" if through is None else " AND id <= %s"
        rows = await self.db.fetchall(
            f"SELECT status, COUNT(*) AS n FROM {self.runs} WHERE id > %s{upper} GROUP BY status",
            (after,) if through is None else (after, through),
            doing="counting runs by status",
        )
        return [(str(r["status"]), int(r["n"])) for r in rows]

    async def seed_summaries(self) -> list[SeedSummary]:
        """Each seed's runs, in the order the seeds were first used."""
        rows = await self.db.fetchall(
            "SELECT c.seed AS seed, COUNT(*) AS runs,"
            " SUM(r.status = 'completed' AND r.high_score IS NOT NULL) AS completed,"
            " MAX(CASE WHEN r.status = 'completed' THEN r.high_score END) AS best,"
            f" MIN(r.id) AS first FROM {self.runs} r JOIN {self.configurations} c"
            " ON c.run_id = r.run_id GROUP BY c.seed ORDER BY first",
            doing="summarising SnakeLab's runs per seed",
        )
        return [
            SeedSummary(
                int(r["seed"]), int(r["runs"]), int(r["completed"] or 0), optional_int(r["best"])
            )
            for r in rows
        ]

    async def best_of_newest_seed(self) -> dict[str, Any] | None:
        """``run_id, high_score, seed, position`` of the best completed run (the first of
        equals) on the seed of the newest one with a score, or None without such a run."""
        runs = f"{self.runs} r JOIN {self.configurations} c ON c.run_id = r.run_id"
        scored = "r.status = 'completed' AND r.high_score IS NOT NULL"
        newest = await self.db.fetchone(
            f"SELECT c.seed FROM {runs} WHERE {scored} ORDER BY r.id DESC LIMIT 1",
            doing="finding the newest seed",
        )
        if newest is None:
            return None
        best = await self.db.fetchone(
            f"SELECT r.run_id, r.high_score, c.seed FROM {runs}"
            f" WHERE {scored} AND c.seed = %s ORDER BY r.high_score DESC, r.id ASC LIMIT 1",
            (newest["seed"],),
            doing="choosing the best run of the newest seed",
        )
        if best is not None:
            best["position"] = await self.position(str(best["run_id"]))
        return best

    async def position(self, run_id: str) -> int:
        """A run's place in SnakeLab's submission order, from 1 (0: no such run)."""
        row = await self.db.fetchone(
            f"SELECT COUNT(*) AS n FROM {self.runs}"
            f" WHERE id <= (SELECT id FROM {self.runs} WHERE run_id = %s)",
            (run_id,),
            doing=f"counting the runs up to {run_id}",
        )
        return 0 if row is None else int(row["n"])


# -- for blocking callers with a cursor of their own (``ax3l-compare``, the test support) -----

NO_SUCH_TABLE = 1146


def first_runs(cur: Any, snakelab_db: str, limit: int) -> list[tuple[str, str, int | None]]:
    """``(run_id, status, high_score)`` of the first ``limit`` runs, in submission order."""
    cur.execute(
        f"SELECT run_id, status, high_score FROM {quote_identifier(snakelab_db)}.simulation_runs"
        " ORDER BY id LIMIT %s",
        (limit,),
    )
    return [(str(r[0]), str(r[1]), optional_int(r[2])) for r in cur.fetchall()]


def run_count(cur: Any, snakelab_db: str) -> int:
    """SnakeLab's number of runs; 0 before SnakeLab has created its tables."""
    try:
        cur.execute(f"SELECT COUNT(*) FROM {quote_identifier(snakelab_db)}.simulation_runs")
    except pymysql.err.ProgrammingError as exc:
        if exc.args and exc.args[0] == NO_SUCH_TABLE:
            return 0
        raise
    return int(cur.fetchone()[0])


RUN_HEAD = ("id", "run_id", "status", "high_score", "episode_count", "started_at", "error_message")


def runs_with_configurations(cur: Any, snakelab_db: str) -> list[dict[str, Any]]:
    """Every run in submission order: its ``RUN_HEAD`` columns and ``config``, its
    configuration's columns by name (None while it has no ``configurations`` row)."""
    db = quote_identifier(snakelab_db)
    cur.execute(
        f"SELECT r.{', r.'.join(RUN_HEAD)}, c.* FROM {db}.simulation_runs r"
        f" LEFT JOIN {db}.configurations c ON c.run_id = r.run_id ORDER BY r.id"
    )
    names = [d[0] for d in cur.description][len(RUN_HEAD) :]
    runs = []
    for row in cur.fetchall():
        config = dict(zip(names, row[len(RUN_HEAD) :], strict=True))
        has_row = config.pop("run_id") is not None
        runs.append(
            {**dict(zip(RUN_HEAD, row, strict=False)), "config": config if has_row else None}
        )
    return runs


def episode_counts(cur: Any, snakelab_db: str) -> dict[str, int]:
    """How many episode rows each run with any has."""
    cur.execute(
        f"SELECT run_id, COUNT(*) FROM {quote_identifier(snakelab_db)}.simulation_episodes"
        " GROUP BY run_id"
    )
    return {str(run_id): int(n) for run_id, n in cur.fetchall()}


def configured_runs(cur: Any, snakelab_db: str, limit: int | None = None) -> list[dict[str, Any]]:
    """``run_id, status, high_score`` and every configuration column of the runs that have
    their configuration, in submission order (the first ``limit``; None: all)."""
    db = quote_identifier(snakelab_db)
    cur.execute(
        f"SELECT r.run_id, r.status, r.high_score, c.* FROM {db}.simulation_runs r"
        f" JOIN {db}.configurations c ON c.run_id = r.run_id ORDER BY r.id"
        + ("" if limit is None else " LIMIT %s"),
        () if limit is None else (limit,),
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def finished_runs(
    cur: Any, snakelab_db: str, columns: Sequence[str], finished: Sequence[str]
) -> list[dict[str, Any]]:
    """The runs in a ``finished`` state with a configuration, in submission order:
    ``id, run_id, status, high_score, created_at, started_at, completed_at, seed``, the
    configuration's ``columns`` and the run's ``proposer, entry`` (Ax3l's ``run_provenance``,
    None without a row)."""
    db = quote_identifier(snakelab_db)
    picked = ", ".join(f"c.{quote_identifier(column)}" for column in columns)
    cur.execute(
        "SELECT r.id, r.run_id, r.status, r.high_score, r.created_at, r.started_at,"
        f" r.completed_at, c.seed, {picked}, p.proposer, p.entry"
        f" FROM {db}.simulation_runs r JOIN {db}.configurations c"
        f" ON c.run_id = r.run_id LEFT JOIN run_provenance p ON p.run_id = r.run_id"
        f" WHERE r.status IN ({placeholders(finished)}) ORDER BY r.id",
        tuple(finished),
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def count_not_in(cur: Any, snakelab_db: str, states: Sequence[str]) -> int:
    """How many runs are in none of ``states``."""
    cur.execute(
        f"SELECT COUNT(*) FROM {quote_identifier(snakelab_db)}.simulation_runs"
        f" WHERE status NOT IN ({placeholders(states)})",
        tuple(states),
    )
    return int(cur.fetchone()[0])
