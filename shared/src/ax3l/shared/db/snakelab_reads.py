"""Every read of SnakeLab's tables that Ax3l's loop and broker need, in one place.

SnakeLab owns ``simulation_runs`` and ``configurations`` (Ax3l has SELECT only); their columns
are SnakeLab's contract. The configuration index (``ax3l.shared.config_index``) keeps its own
incremental reads; the report pages keep theirs per resource (``reports/queries/``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database, placeholders

RUN_COLUMNS = (
    "r.id, r.run_id, r.project_version, r.config_hash, r.status, r.episode_count,"
    " r.high_score, r.created_at, r.started_at, r.completed_at, r.error_message"
)


def _count_sql(db: Database) -> str:
    return f"SELECT COUNT(*) AS n FROM {db.sl('simulation_runs')}"


async def count_simulations(db: Database) -> int:
    """SnakeLab's total number of runs, any status, repeats included."""
    row = await db.fetchone(_count_sql(db), doing="counting simulations")
    return int(row["n"]) if row else 0


async def count_simulations_in(db: Database, cur: Any) -> int:
    """``count_simulations`` inside the caller's transaction (``cur`` its cursor)."""
    await cur.execute(_count_sql(db))
    row = await cur.fetchone()
    return int(row["n"]) if row else 0


async def run_with_config(db: Database, schema: ConfigSchema, run_id: str) -> dict[str, Any] | None:
    """A run's row plus its nested ``config``, or None if SnakeLab has no such run."""
    columns = ", ".join(f"c.{column}" for column in schema.columns)
    row = await db.fetchone(
        f"SELECT {RUN_COLUMNS}, {columns} FROM {db.sl('simulation_runs')} r"
        f" JOIN {db.sl('configurations')} c ON c.run_id = r.run_id WHERE r.run_id = %s",
        (run_id,),
        doing=f"reading run {run_id}",
    )
    if row is None:
        return None
    flat = {column: row.pop(column) for column in schema.columns}
    row["config"] = schema.unflatten(flat)
    return row


async def run_rows(db: Database, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """``id, run_id, status, high_score, episode_count, error_message`` of ``run_ids``, in
    submission order."""
    if not run_ids:
        return []
    return await db.fetchall(
        "SELECT id, run_id, status, high_score, episode_count, error_message"
        f" FROM {db.sl('simulation_runs')} WHERE run_id IN ({placeholders(run_ids)}) ORDER BY id",
        list(run_ids),
        doing="reading the attempts at a configuration",
    )


async def newest_usable_run(
    db: Database, run_ids: Sequence[str], unusable_states: Sequence[str]
) -> str | None:
    """The newest of ``run_ids`` not in ``unusable_states`` and not completed without a high
    score, or None."""
    if not run_ids:
        return None
    row = await db.fetchone(
        f"SELECT run_id FROM {db.sl('simulation_runs')} WHERE run_id IN ({placeholders(run_ids)})"
        f" AND status NOT IN ({placeholders(unusable_states)})"
        " AND NOT (status = 'completed' AND high_score IS NULL)"
        " ORDER BY id DESC LIMIT 1",
        (*run_ids, *unusable_states),
        doing="looking for a usable run of a configuration",
    )
    return None if row is None else str(row["run_id"])


async def runs_matching(
    db: Database, equal: Mapping[str, Any], columns: Sequence[str], doing: str
) -> list[dict[str, Any]]:
    """``run_id, status, high_score`` and ``columns`` of every run whose configuration has the
    given value in each column of ``equal``, in submission order.

    The comparison happens in SQL, exactly: integers as integers, and numbers as DOUBLEs
    against the float sent as a double literal (pymysql writes ``repr(x)e0``), which parses
    back to that very float; so only matching rows leave the server.
    """
    where = " AND ".join(f"c.{column} = %s" for column in equal) or "1 = 1"
    wanted = ", ".join(f"c.{column}" for column in columns)
    return await db.fetchall(
        f"SELECT r.run_id, r.status, r.high_score, {wanted}"
        f" FROM {db.sl('simulation_runs')} r JOIN {db.sl('configurations')} c"
        f" ON c.run_id = r.run_id WHERE {where} ORDER BY r.id",
        list(equal.values()),
        doing=doing,
    )
