"""The user's real SnakeLab export (``data/snakelab-runs.csv``, see ``data/README.md``) loaded
into SnakeLab's tables, as the history an existing SnakeLab brings to ``ax3l-db adopt``.

``load_history`` writes its runs with SnakeLab's credentials, in submission order, with their
recorded status, high score and timestamps; asked for more runs than the export has, it repeats
the export with fresh run ids and the seeds moved on by 3 per copy (the export uses three
seeds), so a longer history keeps the real one's shape and has no configuration twice.
Test-only.
"""

from __future__ import annotations

import csv
import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.tables import CONFIGURATIONS, SIMULATION_RUNS, insert
from ax3l.testing.databases import TestDatabases

REPO = Path(__file__).resolve().parents[4]
RUNS_CSV = REPO / "data" / "snakelab-runs.csv"
SEEDS_PER_COPY = 3
BATCH = 1000


@dataclass
class ExportedRun:
    """One run of the export (a test may change its status before inserting it)."""

    order: int
    run_id: str
    project_version: str
    status: str
    high_score: int
    completed_at: datetime | None
    flat: dict[str, int | float]  # SnakeLab's 26 configuration columns

    @property
    def seed(self) -> int:
        return int(self.flat["seed"])


def read_export(schema: ConfigSchema, path: Path = RUNS_CSV) -> list[ExportedRun]:
    """The export's runs in submission order, values typed as the schema says."""
    runs = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            flat = {
                column: schema.coerce(schema.by_column[column], float(row[column]))
                for column in schema.columns
            }
            runs.append(
                ExportedRun(
                    order=int(row["order"]),
                    run_id=row["run_id"],
                    project_version=row["project_version"],
                    status=row["status"],
                    high_score=int(row["high_score"]),
                    completed_at=datetime.fromisoformat(row["completed_at"])
                    if row["completed_at"]
                    else None,
                    flat=flat,
                )
            )
    return runs


def copied(runs: list[ExportedRun], copies: int) -> list[ExportedRun]:
    """``runs`` ``copies`` times; copy k > 0 has fresh run ids and seeds moved on by 3k."""
    result = list(runs)
    for k in range(1, copies):
        for run in runs:
            flat = {**run.flat, "seed": int(run.flat["seed"]) + SEEDS_PER_COPY * k}
            result.append(
                ExportedRun(
                    order=run.order + k * len(runs),
                    run_id=str(uuid.UUID(int=uuid.UUID(run.run_id).int ^ k)),
                    project_version=run.project_version,
                    status="completed",
                    high_score=run.high_score,
                    completed_at=run.completed_at,
                    flat=flat,
                )
            )
    return result


def _row(schema: ConfigSchema, run: ExportedRun) -> dict[str, Any]:
    created = datetime(2026, 9, 15, 8, 50) + timedelta(minutes=5 * (run.order - 1))
    text = json.dumps(schema.unflatten(run.flat), sort_keys=True, separators=(",", ":"))
    completed = run.completed_at if run.status == "completed" else None
    return {
        "run_id": run.run_id,
        "project_version": run.project_version,
        "config_hash": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "status": run.status,
        "episode_count": int(run.flat["epochs"]) if run.status == "completed" else 700,
        "high_score": run.high_score,
        "created_at": created,
        "started_at": created,
        "completed_at": completed
        or (created + timedelta(minutes=5) if run.status == "completed" else None),
    }


def load_history(
    databases: TestDatabases, schema: ConfigSchema, runs: int | None = None
) -> list[ExportedRun]:
    """Write the export into SnakeLab's tables, repeated (``copied``) up to ``runs`` runs
    (None: the export once); returns the runs written."""
    export = read_export(schema)
    wanted = len(export) if runs is None else runs
    written = copied(export, -(-wanted // len(export)))[:wanted]
    conn = databases.connect("snakelab", databases.snakelab_db)
    try:
        with conn.cursor() as cur:
            for start in range(0, len(written), BATCH):
                batch = written[start : start + BATCH]
                rows = [_row(schema, run) for run in batch]
                cur.executemany(insert(SIMULATION_RUNS, rows[0]), rows)
                rows = [
                    {"run_id": r.run_id, **{c: r.flat[c] for c in schema.columns}} for r in batch
                ]
                cur.executemany(insert(CONFIGURATIONS, rows[0]), rows)
        conn.commit()
    finally:
        conn.close()
    return written
