"""Versioned schema revisions: a release-1 database is refused until ``ax3l-db upgrade``, which
keeps every row and leaves the same tables a fresh database gets."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from ax3l.shared.db import upgrades
from ax3l.shared.db.cli import ensure_schema, reset_events, upgrade_schema
from ax3l.shared.db.errors import SchemaMismatch
from ax3l.testing.big_history import fill_events
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


def _back_at_revision_0002(databases: TestDatabases) -> None:
    """The database as revision 0002 left it: no ``run_provenance`` table."""
    query(databases, "DROP TABLE IF EXISTS run_provenance")
    query(databases, f"UPDATE {upgrades.VERSION_TABLE} SET version_num = '0002'")
    query(databases, "UPDATE ax3l_meta SET value = '2' WHERE name = 'schema_version'")


def _provenance(databases: TestDatabases) -> list[tuple[object, ...]]:
    return query(databases, "SELECT * FROM run_provenance ORDER BY event_id")


def _upgrade(databases: TestDatabases, kill_after: float | None = None) -> tuple[int, float]:
    """``ax3l-db upgrade``, kill -9'd ``kill_after`` seconds after its ``run_provenance`` table
    appears (None: not killed); its exit code and how long the table took to fill and commit."""
    env = {**databases.env(), "PATH": "/usr/bin:/bin"}
    upgrade = subprocess.Popen(
        [sys.executable, "-m", "ax3l.shared.db.cli", "upgrade"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while upgrade.poll() is None and not query(databases, "SHOW TABLES LIKE 'run_provenance'"):
            time.sleep(0.002)
        table_made = time.monotonic()
        if kill_after is None:
            return upgrade.wait(120), time.monotonic() - table_made
        time.sleep(kill_after)
    finally:
        upgrade.kill()
        upgrade.wait(30)
    return upgrade.returncode, 0.0


def test_an_upgrade_killed_mid_way_is_finished_by_the_next(databases: TestDatabases) -> None:
    """``ax3l-db upgrade`` kill -9'd at moments spread over revision 0003's back-fill leaves
    revision 0002 and not one row (its table made, its rows not committed), or revision 0003
    and every row; the next upgrade writes exactly the rows of an upgrade never killed."""
    fill_events(databases, 40_000)  # a run of its own in each submission and proposal:
    query(
        databases,
        "UPDATE event_messages SET content = JSON_OBJECT('run_id', CONCAT('r-', event_id))",
    )
    _back_at_revision_0002(databases)
    code, filling = _upgrade(databases)
    assert code == 0
    expected = _provenance(databases)
    assert len(expected) > 1000, "a history with runs to back-fill"

    killed_mid_way = 0
    for share in (0.0, 0.2, 0.4, 0.6, 0.8):
        _back_at_revision_0002(databases)
        _upgrade(databases, kill_after=share * filling)
        version = query(databases, f"SELECT version_num FROM {upgrades.VERSION_TABLE}")
        if version == [("0003",)]:  # it committed before the kill
            assert _provenance(databases) == expected, share
            continue
        killed_mid_way += 1
        assert version == [("0002",)] and _provenance(databases) == [], share
    assert killed_mid_way >= 2, "the kills landed mid-way"

    assert _upgrade(databases)[0] == 0
    assert _provenance(databases) == expected
