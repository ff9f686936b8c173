"""``ax3l-db adopt`` on the user's real SnakeLab export, and the start-up refusal it answers."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess

import pytest

from ax3l.shared.config_schema import load_schema
from ax3l.shared.db import adopt
from ax3l.shared.db.adopt import refusal
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.testing.databases import TestDatabases, run_module
from ax3l.testing.snakelab_export import ExportedRun, load_history
from ax3l.testing.snakelab_rows import insert_runs

SCHEMA = load_schema()


def expected_golden(runs: list[ExportedRun]) -> ExportedRun:
    """The best completed run of the newest seed (the latest completed run's), earliest first."""
    completed = [run for run in runs if run.status == "completed"]
    newest = completed[-1].flat["seed"]
    on_seed = [run for run in completed if run.flat["seed"] == newest]
    return max(on_seed, key=lambda run: (run.high_score, -run.order))


def adopt_cli(databases: TestDatabases, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    env = {**databases.env(), "PATH": "/usr/bin:/bin", **env}
    return run_module("ax3l.shared.db.cli", "adopt", *args, env=env, timeout=60)


rows = TestDatabases.query  # rows(databases, sql): as the admin, in Ax3l's database


def test_adopt_takes_the_best_run_of_the_newest_seed_once_and_survives_a_kill(
    snakelab_tables: TestDatabases,
) -> None:
    """--dry-run writes nothing; a kill before commit leaves nothing; adopt writes one golden
    (kind adopted) with its highscore row and the run count; running it again writes nothing."""
    runs = load_history(snakelab_tables, SCHEMA)
    golden = expected_golden(runs)
    assert golden.flat["seed"] != runs[0].flat["seed"], "the export has more than one seed"

    planned = "\n".join(asyncio.run(adopt.run(snakelab_tables.settings(), SCHEMA, True)).describe())
    assert golden.run_id in planned and f"run {golden.order} of {len(runs)}" in planned
    assert f"high score {golden.high_score} on seed {golden.flat['seed']}" in planned
    assert rows(snakelab_tables, "SELECT COUNT(*) FROM events") == [(0,)]

    killed = adopt_cli(snakelab_tables, AX3L_TEST_CRASH_AT="adopt_before_commit")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert rows(snakelab_tables, "SELECT COUNT(*) FROM events") == [(0,)]
    assert rows(snakelab_tables, "SELECT COUNT(*) FROM experiment_highscores") == [(0,)]

    done = asyncio.run(adopt.run(snakelab_tables.settings(), SCHEMA, False))
    assert not done.already and done.simulations == len(runs)
    events = rows(
        snakelab_tables,
        "SELECT e.event_id, e.name, e.process_id, m.content FROM events e"
        " JOIN event_messages m ON m.event_id = e.event_id",
    )
    assert len(events) == 1
    event_id, name, process_id, content = events[0]
    assert event_id == done.event_id
    stored = GoldenConfigCreated.model_validate(json.loads(content))
    assert name == "golden_config_created" and process_id == golden.run_id
    assert stored.kind == "adopted" and stored.run_id == golden.run_id
    assert (stored.high_score, stored.seed, stored.simulations) == (
        golden.high_score,
        golden.flat["seed"],
        len(runs),
    )
    assert SCHEMA.flatten(stored.config) == golden.flat
    assert rows(snakelab_tables, "SELECT * FROM experiment_highscores") == [
        (event_id, len(runs), golden.high_score, golden.flat["seed"])
    ]

    again = asyncio.run(adopt.run(snakelab_tables.settings(), SCHEMA, False))
    assert again.already and again.event_id == event_id and again.position == golden.order
    assert f"run {golden.order} of {len(runs)}" in "\n".join(again.describe())
    assert rows(snakelab_tables, "SELECT COUNT(*) FROM events") == [(1,)]


def test_adopt_refuses_without_runs_and_beside_an_experiment_of_ax3l(
    snakelab_tables: TestDatabases,
) -> None:
    """Nothing to adopt on an empty SnakeLab; an Ax3l database with its own golden is never
    overwritten (the message says how to start over)."""
    with pytest.raises(adopt.AdoptionRefused, match="has no runs: nothing to adopt"):
        asyncio.run(adopt.run(snakelab_tables.settings(), SCHEMA, False))
    defaults = SCHEMA.validate(SCHEMA.default_config())
    (run_id,) = insert_runs(snakelab_tables, SCHEMA, defaults)
    rows(
        snakelab_tables,
        "INSERT INTO events (occurred_at, name, category, log_level, process_id)"
        " VALUES (NOW(), 'golden_config_created', 'Configuration', 'INFO', %s)",
        (run_id,),
    )
    beside = adopt_cli(snakelab_tables)
    assert beside.returncode == 1 and beside.stderr.startswith("ax3l-db: adopt: ")
    assert "already has an experiment" in beside.stderr and "reset-events" in beside.stderr
    assert rows(snakelab_tables, "SELECT COUNT(*) FROM events") == [(1,)]


async def test_refusal_names_both_ways_on_only_for_a_foreign_history(
    snakelab_tables: TestDatabases,
) -> None:
    """Runs of the seeding configuration alone (a seeding killed before it recorded itself) are
    no reason to refuse; any other run is, until Ax3l has an experiment of its own."""
    defaults = SCHEMA.flatten(SCHEMA.validate(SCHEMA.default_config()))
    async with Database(snakelab_tables.settings()) as db:
        assert await refusal(db, defaults) is None
        insert_runs(snakelab_tables, SCHEMA, SCHEMA.unflatten(defaults), status="failed")
        assert await refusal(db, defaults) is None
        runs = load_history(snakelab_tables, SCHEMA)
        message = await refusal(db, defaults)
        assert message is not None
        assert f"already has runs ({len(runs) + 1})" in message
        assert "fresh SnakeLab database" in message and "`ax3l-db adopt`" in message
        async with db.transaction() as cur:
            await EventLog(db).write(
                cur,
                GoldenConfigCreated(
                    run_id=runs[0].run_id,
                    config=SCHEMA.unflatten(runs[0].flat),
                    high_score=runs[0].high_score,
                    seed=int(runs[0].flat["seed"]),
                    simulations=len(runs),
                    reason="test",
                    kind="adopted",
                ),
                highscore=HighscoreRow(len(runs), runs[0].high_score, 1970),
            )
        assert await refusal(db, defaults) is None
