"""Versioned schema revisions: a release-1 database is refused until ``ax3l-db upgrade``, which
keeps every row and leaves the same tables a fresh database gets."""

from __future__ import annotations

import re

import pytest

from ax3l.shared.db import upgrades
from ax3l.shared.db.cli import ensure_schema, reset_events, upgrade_schema
from ax3l.shared.db.errors import SchemaMismatch
from ax3l.testing.databases import TestDatabases, scratch_databases
from ax3l.testing.release_1 import create_release_1, release_1_tables

query = TestDatabases.query  # query(databases, sql): as the admin, in Ax3l's database


def table_definitions(databases: TestDatabases) -> dict[str, str]:
    """``SHOW CREATE TABLE`` of every table, without the AUTO_INCREMENT counter."""
    tables = [row[0] for row in query(databases, "SHOW TABLES")]
    return {
        table: re.sub(
            r" AUTO_INCREMENT=\d+", "", query(databases, f"SHOW CREATE TABLE `{table}`")[0][1]
        )
        for table in tables
    }


HISTORY = [
    "INSERT INTO events (event_id, occurred_at, name, category, log_level, process_id)"
    " VALUES (1, NOW(6), 'golden_config_created', 'Configuration', 'INFO', 'r-1')",
    'INSERT INTO event_messages VALUES (1, \'{"run_id": "r-1", "high_score": 38}\')',
    "INSERT INTO experiment_highscores VALUES (1, 1, 38, 1970)",
    "INSERT INTO events (event_id, occurred_at, name, category, log_level, parent_event_id)"
    " VALUES (2, NOW(6), 'round_robin_checkpoint', 'Configuration', 'INFO', 1)",
]


def test_a_release_1_database_is_refused_until_upgraded_and_keeps_its_history(
    databases: TestDatabases, db_env: dict[str, str]
) -> None:
    """Services (and reset-events, before deleting) refuse a release-1 database naming
    `ax3l-db upgrade`; the upgrade keeps every row, is idempotent, and leaves the tables of a
    database created at the newest revision."""
    create_release_1(databases)
    for statement in HISTORY:
        query(databases, statement)
    before = {table: query(databases, f"SELECT * FROM `{table}`") for table in release_1_tables()}

    with pytest.raises(upgrades.SchemaBehind, match="run `ax3l-db upgrade`") as refused:
        ensure_schema(databases.settings())
    assert f"revision 0001, this Ax3l needs {upgrades.head()}" in str(refused.value)
    for recreate in (False, True):
        with pytest.raises(upgrades.SchemaBehind):
            reset_events(databases.settings(), recreate=recreate)
    assert query(databases, "SELECT COUNT(*) FROM events") == [(2,)], "nothing deleted"

    done = upgrade_schema(databases.settings())  # the command itself: the long end-to-end test
    assert f"from revision 0001 to {upgrades.head()}" in done
    assert ensure_schema(databases.settings()).startswith("schema is up to date")
    for table, rows in before.items():
        if table != "ax3l_meta":
            assert query(databases, f"SELECT * FROM `{table}`") == rows, table
    assert query(databases, f"SELECT version_num FROM {upgrades.VERSION_TABLE}") == [
        (upgrades.head(),)
    ]
    # Release 1 refuses any version row but '1': an upgraded database is safe from it.
    assert query(databases, "SELECT value FROM ax3l_meta WHERE name = 'schema_version'") == [
        (upgrades.marker(upgrades.head()),)
    ]

    assert upgrade_schema(databases.settings()).startswith("schema is up to date")

    with scratch_databases(db_env, prefix="u") as fresh:
        assert table_definitions(databases) == table_definitions(fresh)


def test_an_upgrade_refuses_a_database_of_a_newer_ax3l(databases: TestDatabases) -> None:
    """A revision this Ax3l does not know is never upgraded over: the message names it."""
    query(databases, f"UPDATE {upgrades.VERSION_TABLE} SET version_num = '0999'")
    with pytest.raises(SchemaMismatch, match="revision 0999, which this Ax3l does not know"):
        upgrade_schema(databases.settings())
    assert query(databases, f"SELECT version_num FROM {upgrades.VERSION_TABLE}") == [("0999",)]


def test_a_fresh_database_is_created_at_the_newest_revision(databases: TestDatabases) -> None:
    """ensure_schema (every service's start) stamps a new database with the newest revision."""
    assert query(databases, f"SELECT version_num FROM {upgrades.VERSION_TABLE}") == [
        (upgrades.head(),)
    ]
    assert upgrades.revisions()[0] == "0001" and upgrades.head() in upgrades.revisions()
