"""The tables made from ``ax3l.shared.db.tables``' metadata are the tables the DDL strings of
commit e587013 made (``schema_e587013.sql``), in both databases, as MariaDB describes them."""

from __future__ import annotations

import secrets
from contextlib import closing
from pathlib import Path
from typing import Any

from ax3l.testing.databases import TestDatabases, admin_connection, created_databases

REFERENCE = Path(__file__).with_name("schema_e587013.sql")


def _statements(database: str) -> list[str]:
    """The reference's statements for ``database`` (``ax3l`` or ``snakelab``)."""
    ax3l, snakelab = REFERENCE.read_text().split("-- snakelab\n")
    text = ax3l if database == "ax3l" else snakelab
    lines = [line for line in text.splitlines() if not line.startswith("--")]
    return [s.strip() for s in "\n".join(lines).split("\n;") if s.strip()]


def _described(cur: Any, database: str) -> dict[str, str]:
    """``SHOW CREATE TABLE`` of every table of ``database``, by name."""
    cur.execute(f"SHOW TABLES FROM `{database}`")
    names = [row[0] for row in cur.fetchall()]
    described = {}
    for name in names:
        cur.execute(f"SHOW CREATE TABLE `{database}`.`{name}`")
        described[name] = cur.fetchone()[1]
    return described


def test_the_metadata_makes_the_tables_of_the_old_ddl(
    snakelab_tables: TestDatabases, db_env: dict[str, str]
) -> None:
    suffix = secrets.token_hex(4)
    old = {"ax3l": f"ax3l_old{suffix}", "snakelab": f"snakelab_old{suffix}"}
    new = {"ax3l": snakelab_tables.ax3l_db, "snakelab": snakelab_tables.snakelab_db}
    with created_databases(db_env, list(old.values()), []):
        for database, name in old.items():
            with closing(admin_connection(db_env, name)) as conn, conn.cursor() as cur:
                for statement in _statements(database):
                    cur.execute(statement)
        with closing(admin_connection(db_env)) as conn, conn.cursor() as cur:
            for database in ("ax3l", "snakelab"):
                before, after = _described(cur, old[database]), _described(cur, new[database])
                assert len(before) == {"ax3l": 13, "snakelab": 3}[database]
                for name, create in before.items():
                    assert after.get(name) == create, name
