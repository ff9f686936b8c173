"""The report server's own login: SELECT on both databases and nothing else."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pymysql
import pytest
from reports_testing import app_client, reports_settings

from ax3l.shared.db.cli import reports_grants
from ax3l.testing.databases import TestDatabases

TABLE_ACCESS_DENIED = 1142
WRITES = [
    "INSERT INTO events (name, level) VALUES ('x', 'INFO')",
    "UPDATE events SET name = 'x'",
    "DELETE FROM events",
]


@pytest.fixture
def reports_login(snakelab_tables: TestDatabases) -> Iterator[tuple[str, str]]:
    """A throwaway user given exactly the grants of ``ax3l-db grant-reports``."""
    user, password = f"ax3l_r_{secrets.token_hex(4)}", secrets.token_hex(12)
    admin = snakelab_tables.connect("admin")
    try:
        with admin.cursor() as cur:
            for statement in reports_grants(snakelab_tables.settings(), user, password):
                cur.execute(statement)
        yield user, password
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()


def _connect(dbs: TestDatabases, user: str, password: str, database: str) -> pymysql.Connection:
    return pymysql.connect(
        host=dbs.host, port=dbs.port, user=user, password=password, database=database,
        autocommit=True,
    )  # fmt: skip


def _refused(conn: pymysql.Connection, statement: str) -> int:
    with conn.cursor() as cur, pytest.raises(pymysql.err.MySQLError) as refused:
        cur.execute(statement)
    return int(refused.value.args[0])


def test_reports_login_reads_both_databases_and_cannot_write(snakelab_tables, reports_login):
    """The grant-reports login SELECTs events and runs; INSERT/UPDATE/DELETE are refused."""
    user, password = reports_login
    with closing(_connect(snakelab_tables, user, password, snakelab_tables.ax3l_db)) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM events")
            cur.execute(f"SELECT COUNT(*) FROM `{snakelab_tables.snakelab_db}`.simulation_runs")
        for statement in WRITES:
            assert _refused(conn, statement) == TABLE_ACCESS_DENIED, statement
        assert _refused(conn, "CREATE TABLE scratch (x INT)") == TABLE_ACCESS_DENIED
        runs = f"`{snakelab_tables.snakelab_db}`.simulation_runs"
        assert _refused(conn, f"DELETE FROM {runs}") == TABLE_ACCESS_DENIED


async def test_report_server_logs_in_as_its_own_user(snakelab_tables, reports_login):
    """With AX3L_REPORTS_DB_USER/PASSWORD set the report server uses them over DB_USER."""
    user, password = reports_login
    settings = reports_settings(
        snakelab_tables, AX3L_REPORTS_DB_USER=user, AX3L_REPORTS_DB_PASSWORD=password
    )
    assert settings.db_user == user and settings.db_password.get_secret_value() == password
    async with app_client(settings) as client:
        reply = await client.get("/api/events")
        assert reply.status_code == 200, reply.text


def test_grant_reports_prints_only_select_grants():
    """`ax3l-db grant-reports USER` prints a CREATE USER and SELECT grants on both databases."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AX3L_DB_NAME": "ax3l_x",
        "AX3L_SNAKELAB_DB_NAME": "snakelab_x",
        "AX3L_REPORTS_DB_PASSWORD": "pw'1",
    }
    cli = Path(sys.executable).parent / "ax3l-db"
    done = subprocess.run(
        [str(cli), "grant-reports", "viewer"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "CREATE USER IF NOT EXISTS 'viewer'@'%' IDENTIFIED BY 'pw''1';",
        "GRANT SELECT ON `ax3l_x`.* TO 'viewer'@'%';",
        "GRANT SELECT ON `snakelab_x`.* TO 'viewer'@'%';",
    ]


def test_private_mariadbs_reports_user_cannot_write(db_env):
    """scripts/mariadb.sh's ax3l_reports login (db.env) is refused writes on ax3l.events."""
    user = db_env.get("AX3L_REPORTS_DB_USER")
    if not user:
        pytest.fail("db.env has no AX3L_REPORTS_DB_USER: run `scripts/mariadb.sh start` again")
    connection = pymysql.connect(
        host=db_env["DB_HOST"], port=int(db_env["DB_PORT"]), user=user,
        password=db_env["AX3L_REPORTS_DB_PASSWORD"], database="ax3l", autocommit=True,
    )  # fmt: skip
    with closing(connection) as conn:
        for statement in WRITES:
            assert _refused(conn, statement) == TABLE_ACCESS_DENIED, statement
