"""A SnakeLab run: its summary, config, best-game snapshot, episodes and Ax3l events."""

from __future__ import annotations

import json
from typing import Any

from ax3l.reports import event_contents
from ax3l.reports.models.simulations import Episode, Run, RunEvent, Simulation
from ax3l.shared.config_schema import ConfigInvalid, ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.db.report_reads import run_event_rows
from ax3l.shared.db.snakelab_reads import SnakeLabRuns


def _snapshot(value: Any) -> Any:
    if value is None or isinstance(value, (dict, list)):
        return value
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return None


async def simulation(db: Database, schema: ConfigSchema, run_id: str) -> Simulation | None:
    """A run with its configuration, best-game snapshot, episodes and Ax3l events, or None."""
    runs = SnakeLabRuns(db)
    run = await runs.run(run_id)
    if run is None:
        return None
    flat = await runs.flat_config(run_id)
    config = None
    if flat is not None:
        try:
            config = schema.unflatten(flat)
        except (KeyError, ConfigInvalid):
            config = None  # columns of another schema version: the flat view still shows them
    (episodes,) = (await runs.episodes(run_id)).values()
    events = await run_event_rows(db, run_id)
    snapshot = _snapshot(run.pop("high_score_snapshot"))
    return Simulation(
        run=Run.model_validate(run),
        config=config,
        flat_config=flat,
        snapshot=snapshot,
        episodes=[Episode.model_validate(e) for e in episodes],
        events=[_event(e) for e in events],
    )


def _event(row: dict[str, Any]) -> RunEvent:
    """A run's event with its label and sentence (``event_contents.summary``, as the log)."""
    said = event_contents.summary(
        row["name"], row.pop("content"), parameter=row["parameter"], source_name=row["source_name"]
    )
    return RunEvent.model_validate(
        {**row, "label": event_contents.label(row["name"]), "summary": said}
    )
