"""SnakeLab's rows written straight into its tables, as SnakeLab (or another writer) does:
for tests of what reads them without a server running."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.tables import CONFIGURATIONS, SIMULATION_RUNS, insert
from ax3l.testing.databases import TestDatabases


def insert_run(
    cur: Any,
    schema: ConfigSchema,
    config: dict[str, Any],
    status: str = "completed",
    version: str = "2.1.0",
    run_id: str | None = None,
) -> str:
    """One run's ``simulation_runs`` and ``configurations`` rows, written with ``cur``;
    returns its run id."""
    run_id = run_id or str(uuid.uuid4())
    flat = schema.flatten(config)
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    run = {
        "run_id": run_id,
        "project_version": version,
        "config_hash": hashlib.sha256(text.encode()).hexdigest(),
        "status": status,
        "created_at": datetime.now(UTC).replace(tzinfo=None),
    }
    cur.execute(insert(SIMULATION_RUNS, run), run)
    configuration = {"run_id": run_id, **flat}
    cur.execute(insert(CONFIGURATIONS, configuration), configuration)
    return run_id


def insert_runs(
    databases: TestDatabases,
    schema: ConfigSchema,
    *configs: dict[str, Any],
    database: str | None = None,
    **fields: Any,
) -> list[str]:
    """``insert_run`` for each of ``configs`` as the SnakeLab user, in SnakeLab's database of
    ``databases`` (or ``database``); ``fields`` as ``insert_run`` takes them."""
    conn = databases.connect("snakelab", database or databases.snakelab_db)
    try:
        with conn.cursor() as cur:
            return [insert_run(cur, schema, config, **fields) for config in configs]
    finally:
        conn.close()
