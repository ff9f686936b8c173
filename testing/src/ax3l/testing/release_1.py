"""Ax3l's database as release 1 (before versioned migrations) left it, for the upgrade tests and
the migration bench.

``release_1_schema.sql`` is release 1's DDL, frozen. ``create_release_1`` empties Ax3l's test
database and creates release 1's tables in it; ``move_into_release_1`` does that around a history
already written (by the real loop), copying every row into the release-1 tables, so an upgrade
test starts from exactly what a user of release 1 has. Test-only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ax3l.testing.databases import TestDatabases

SQL = Path(__file__).with_name("release_1_schema.sql")


def statements() -> list[str]:
    """Release 1's statements, in order (tables, indexes, the version row)."""
    text = "\n".join(line for line in SQL.read_text().splitlines() if not line.startswith("--"))
    return [part.strip() for part in text.split(";\n") if part.strip()]


def release_1_tables() -> list[str]:
    """Release 1's tables, in creation order (parents before children)."""
    return [
        statement.split()[5]
        for statement in statements()
        if statement.startswith("CREATE TABLE IF NOT EXISTS")
    ]


def _tables(cur: Any) -> list[str]:
    cur.execute("SHOW TABLES")
    return [str(row[0]) for row in cur.fetchall()]


def _drop_all(cur: Any) -> None:
    cur.execute("SET SESSION foreign_key_checks = 0")
    for table in _tables(cur):
        cur.execute(f"DROP TABLE `{table}`")
    cur.execute("SET SESSION foreign_key_checks = 1")


def create_release_1(databases: TestDatabases) -> None:
    """Drop every table of Ax3l's test database and create release 1's."""
    conn = databases.connect("admin", databases.ax3l_db)
    try:
        with conn.cursor() as cur:
            _drop_all(cur)
            for statement in statements():
                cur.execute(statement)
    finally:
        conn.close()


def move_into_release_1(databases: TestDatabases) -> dict[str, int]:
    """Put the rows of Ax3l's test database into release 1's tables (dropping every table a
    later revision added); returns the rows per table. The tables wait meanwhile in a database
    of their own (foreign key names are unique per database)."""
    kept = f"{databases.ax3l_db}_kept"
    conn = databases.connect("admin", databases.ax3l_db)
    moved: dict[str, int] = {}
    try:
        with conn.cursor() as cur:
            wanted = release_1_tables()
            cur.execute(f"CREATE DATABASE `{kept}`")
            cur.execute("SET SESSION foreign_key_checks = 0")
            for table in _tables(cur):
                if table in wanted:
                    cur.execute(f"RENAME TABLE `{table}` TO `{kept}`.`{table}`")
                else:
                    cur.execute(f"DROP TABLE `{table}`")
            cur.execute("SET SESSION foreign_key_checks = 1")
            for statement in statements():
                cur.execute(statement)
            cur.execute(f"SHOW TABLES FROM `{kept}`")
            present = {str(row[0]) for row in cur.fetchall()}
            for table in wanted:
                if table in present and table != "ax3l_meta":
                    copy = f"INSERT INTO `{table}` SELECT * FROM `{kept}`.`{table}`"
                    moved[table] = cur.execute(copy)
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{kept}`")
        conn.close()
    return moved
