"""Reads that more than one service needs (SnakeLab's tables and the golden configuration)."""

from __future__ import annotations

import json
from typing import Any

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.event_models import GoldenConfigCreated

RUN_COLUMNS = (
    "r.id, r.run_id, r.project_version, r.config_hash, r.status, r.episode_count,"
    " r.high_score, r.created_at, r.started_at, r.completed_at, r.error_message"
)


async def count_simulations(db: Database) -> int:
    """SnakeLab's total number of runs, any status, repeats included."""
    row = await db.fetchone(
        f"SELECT COUNT(*) AS n FROM {db.sl('simulation_runs')}", doing="counting simulations"
    )
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


async def current_golden(db: Database) -> tuple[int, GoldenConfigCreated] | None:
    """The latest ``golden_config_created`` event id and content, or None before seeding.

    Unlike the reports' lenient reads, this one is strict about what the loop needs: a content
    without one of the model's required fields raises ``ValidationError``. Values convert as
    the loop has always read them (pydantic's lax mode: ``41.0`` or ``"41"`` for a high score).
    """
    row = await db.fetchone(
        "SELECT e.event_id, m.content FROM events e"
        " JOIN event_messages m ON m.event_id = e.event_id"
        " WHERE e.name = 'golden_config_created' ORDER BY e.event_id DESC LIMIT 1",
        doing="reading the golden configuration",
    )
    if row is None:
        return None
    content = json.loads(row["content"])
    return int(row["event_id"]), GoldenConfigCreated.model_validate(content, strict=False)
