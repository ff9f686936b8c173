import asyncio
import json
import subprocess
import sys

import pymysql
import pytest

from ax3l.shared.db import upgrades
from ax3l.shared.db.cli import ensure_schema, reset_events
from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError, DatabaseUnavailable, SchemaMismatch
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.db.reads import current_golden
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import GoldenConfigCreated, PromptSent, ReplyReceived

GOLDEN = GoldenConfigCreated(
    run_id="r1", config={}, high_score=40, seed=1970, simulations=1, reason="initial"
)


def _count(dbs, table):
    return dbs.query(f"SELECT COUNT(*) FROM {table}")[0][0]


def _event_rows(dbs):
    """How many events, event messages and highscore rows are stored."""
    return tuple(
        _count(dbs, table) for table in ("events", "event_messages", "experiment_highscores")
    )


async def test_event_message_and_highscore_are_written_together(databases):
    """An event, its message and its experiment_highscores row land in one transaction."""
    async with Database(databases.settings()) as db:
        event_id = await EventLog(db).log(
            GOLDEN, highscore=HighscoreRow(1, 40, 1970), process_id="r1"
        )
        found = await current_golden(db)
    assert found is not None and found[0] == event_id and found[1].high_score == 40
    assert _event_rows(databases) == (1, 1, 1)


async def test_failed_highscore_insert_rolls_back_the_event(databases):
    """If the highscore row cannot be written, neither the event nor its message remain."""
    async with Database(databases.settings()) as db:
        with pytest.raises(DatabaseError):
            # A negative run count does not fit BIGINT UNSIGNED: the third insert fails.
            await EventLog(db).log(GOLDEN, highscore=HighscoreRow(-5, 1, 1))
    assert _event_rows(databases) == (0, 0, 0)


async def test_event_fields_and_catalog(databases):
    """Category and level come from the catalog; unknown events are refused before writing."""
    async with Database(databases.settings()) as db:
        log = EventLog(db)
        prompt = await log.log(
            PromptSent(text="hello"),
            source_name="ProjectContext",
            parameter="gamma",
            process_id="c" * 36,
        )
        await log.log(ReplyReceived.model_validate({"a": 1}), parent_event_id=prompt)
        with pytest.raises(KeyError, match="unknown event"):
            await log.log("not_an_event", "x")
        rows = await db.fetchall(
            "SELECT e.name, category, log_level, parameter, source_name, parent_event_id, content"
            " FROM events e JOIN event_messages m USING (event_id) ORDER BY event_id"
        )
    assert rows[0]["category"] == "Conversation" and rows[0]["log_level"] == "INFO"
    assert rows[0]["parameter"] == "gamma" and rows[0]["source_name"] == "ProjectContext"
    assert rows[1]["parent_event_id"] == prompt and json.loads(rows[1]["content"]) == {"a": 1}
    assert len(rows) == 2


def test_ax3l_user_cannot_write_to_snakelab(snakelab_tables):
    """The ax3l user may SELECT SnakeLab's tables but never change them."""
    conn = snakelab_tables.connect("ax3l", snakelab_tables.snakelab_db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM simulation_runs")
            assert cur.fetchone()[0] == 0
            for sql in (
                "INSERT INTO simulation_runs (run_id, project_version, config_hash, status,"
                " created_at) VALUES ('x', '1', 'h', 'queued', NOW())",
                "DELETE FROM simulation_runs",
                "CREATE TABLE sneaky (id INT)",
            ):
                with pytest.raises(pymysql.err.OperationalError) as info:
                    cur.execute(sql)
                assert info.value.args[0] in (1142, 1044)
    finally:
        conn.close()


async def test_count_simulations_reads_snakelab(snakelab_tables):
    """The run count is SnakeLab's simulation_runs row count, read with Ax3l's user."""
    for i in range(3):
        snakelab_tables.query(
            "INSERT INTO simulation_runs (run_id, project_version, config_hash, status,"
            " created_at) VALUES (%s, '2.0', 'h', 'failed', NOW())",
            (f"run-{i}",),
            user="snakelab",
        )
    async with Database(snakelab_tables.settings()) as db:
        assert await SnakeLabRuns(db).count() == 3


async def test_unreachable_database_is_a_domain_error(databases):
    """A wrong port gives DatabaseUnavailable with a clear message, not a driver exception."""
    settings = databases.settings(DB_PORT=1)
    with pytest.raises(DatabaseUnavailable, match="database unavailable"):
        await Database(settings).open()


def test_schema_check_is_idempotent_and_refuses_other_versions(databases):
    """ax3l-db can run twice; a revision this Ax3l does not know, or a version row of no
    release, is refused with advice."""
    settings = databases.settings()
    assert ensure_schema(settings) == f"schema is up to date (revision {upgrades.head()})"
    databases.query(f"UPDATE {upgrades.VERSION_TABLE} SET version_num = '0099'")
    with pytest.raises(SchemaMismatch, match="a newer Ax3l wrote it"):
        ensure_schema(settings)
    databases.query(f"DROP TABLE {upgrades.VERSION_TABLE}")
    databases.query("UPDATE ax3l_meta SET value = '99' WHERE name = 'schema_version'")
    with pytest.raises(SchemaMismatch, match="schema version 99"):
        ensure_schema(settings)


def test_old_event_tables_without_parameter_column_are_refused(databases):
    """Event tables from before the parameter column must be recreated, not migrated."""
    databases.query("DROP TABLE ax3l_meta")
    databases.query("ALTER TABLE events DROP COLUMN parameter")
    with pytest.raises(SchemaMismatch, match="no column parameter"):
        ensure_schema(databases.settings())
    reset_events(databases.settings(), recreate=True)
    assert ensure_schema(databases.settings()).startswith("schema is up to date")


def test_existing_user_tables_are_adopted_without_migration(databases):
    """A database holding only the user's three tables (and rows) is adopted as it is."""
    databases.query("DROP TABLE ax3l_meta")
    databases.query("DROP INDEX idx_events_name_id ON events")
    databases.query(
        "INSERT INTO events (occurred_at, name, category, log_level)"
        " VALUES (NOW(), 'prompt_sent', 'Conversation', 'INFO')"
    )
    assert ensure_schema(databases.settings()).startswith("created tables: ax3l_meta ")
    assert _count(databases, "events") == 1
    assert databases.query("SHOW INDEX FROM events WHERE Key_name = 'idx_events_name_id'")


def test_reset_events_cli_needs_confirmation_and_wipes_history(databases):
    """ax3l-db reset-events refuses without --yes and deletes events and highscores with it."""
    conn = databases.connect("admin", databases.ax3l_db)
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO events (occurred_at, name, category, log_level)"
            " VALUES (NOW(), 'golden_config_created', 'Configuration', 'INFO')"
        )
        cur.execute("INSERT INTO experiment_highscores VALUES (LAST_INSERT_ID(), 1, 38, 1970)")
    conn.close()
    env = {**databases.env(), "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "ax3l.shared.db.cli", "reset-events"]
    refused = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert _count(databases, "events") == 1
    done = subprocess.run([*cmd, "--yes"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _count(databases, "events") == 0 and _count(databases, "experiment_highscores") == 0


async def test_closing_cuts_a_connection_nobody_gives_back(databases):
    """close() waits a grace period for connections in use, then closes them: never hangs."""
    db = Database(databases.settings())
    await db.fetchone("SELECT 1")
    assert db._pool is not None
    leaked = await db._pool.acquire()  # held, as by a task that will never finish
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(db.close(grace=0.3), 10)
    assert 0.3 <= asyncio.get_running_loop().time() - started < 5
    assert leaked.closed and db._pool is None
