"""The report server on an adopted SnakeLab history (``ax3l-db adopt``, issue 26): the user's
real export in SnakeLab's tables, the adopted golden in Ax3l's, no other event."""

from __future__ import annotations

from reports_testing import app_client, reports_settings

from ax3l.shared.config_schema import load_schema
from ax3l.shared.db import adopt
from ax3l.testing.databases import TestDatabases
from ax3l.testing.snakelab_export import load_history


async def test_pages_show_the_adopted_history(snakelab_tables: TestDatabases) -> None:
    """The high-score series starts at the adopted golden with the run count at adoption, the
    golden page lists it, the score distribution counts every old run, and the event log says
    the golden was adopted."""
    schema = load_schema()
    runs = load_history(snakelab_tables, schema)
    adoption = await adopt.run(snakelab_tables.settings(), schema, dry_run=False)
    completed = [run for run in runs if run.status == "completed"]

    async with app_client(reports_settings(snakelab_tables)) as client:
        series = (await client.get("/api/highscores")).json()
        assert series["current_simulations"] == len(runs)
        (point,) = series["points"]
        assert (point["simulations"], point["score"], point["seed"], point["run_id"]) == (
            len(runs),
            adoption.high_score,
            adoption.seed,
            adoption.run_id,
        )
        assert point["reason"].startswith("Adopted SnakeLab's existing history")

        (entry,) = (await client.get("/api/golden-configurations")).json()["configurations"]
        assert entry["run_id"] == adoption.run_id and entry["config"] == adoption.config

        scores = (await client.get("/api/score-distribution")).json()
        assert scores["runs"] == len(completed)
        assert scores["best"] == max(run.high_score for run in completed)

        page = await client.get("/experiment-highscores")
        assert page.status_code == 200 and adoption.run_id in page.text

        log = await client.get("/events")
        assert log.status_code == 200 and "(adopted)" in log.text
