"""The tests' databases: private pairs of real databases on the private MariaDB of
``scripts/mariadb.sh`` (``TestDatabases``, ``scratch_databases``), its ``db.env``, and plain
connections to it. The pytest plugin (``ax3l.testing.plugin``) hands them out as fixtures.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from ax3l.shared.db.cli import ensure_schema, seats_grants
from ax3l.shared.db.tables import SNAKELAB_TABLES, ddl
from ax3l.shared.env_files import read_env_file
from ax3l.shared.settings import Settings


def find_env_file() -> Path | None:
    """``AX3L_DB_ENV``, else the nearest ``.run/db.env`` from the working directory up."""
    explicit = os.environ.get("AX3L_DB_ENV")
    if explicit:
        return Path(explicit)
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        candidate = folder / ".run" / "db.env"
        if candidate.exists():
            return candidate
    return None


# TestDatabases' fields and the db.env keys they are read from (the port is an int).
_ENV_KEYS = {
    "host": "DB_HOST",
    "ax3l_user": "DB_USER",
    "ax3l_password": "DB_PASSWORD",
    "snakelab_user": "SNAKELAB_DB_USER",
    "snakelab_password": "SNAKELAB_DB_PASSWORD",
    "admin_user": "AX3L_DB_ADMIN_USER",
    "admin_password": "AX3L_DB_ADMIN_PASSWORD",
}


@dataclass
class TestDatabases:
    """A private pair of databases (``ax3l_*`` and ``snakelab_*``) with the real grants."""

    __test__ = False  # not a test class, despite its name

    host: str
    port: int
    ax3l_db: str
    snakelab_db: str
    ax3l_user: str
    ax3l_password: str
    snakelab_user: str
    snakelab_password: str
    admin_user: str
    admin_password: str

    @classmethod
    def from_env(cls, values: dict[str, str], ax3l_db: str, snakelab_db: str) -> TestDatabases:
        """These two databases with the logins of ``db.env`` values."""
        logins = {field: values[key] for field, key in _ENV_KEYS.items()}
        return cls(port=int(values["DB_PORT"]), ax3l_db=ax3l_db, snakelab_db=snakelab_db, **logins)

    @classmethod
    def of_server(cls, values: dict[str, str]) -> TestDatabases:
        """The ``ax3l`` and ``snakelab`` databases ``scripts/mariadb.sh`` creates on a server
        of its own (its ``db.env`` values), with their grants."""
        return cls.from_env(values, values["AX3L_DB_NAME"], values["AX3L_SNAKELAB_DB_NAME"])

    def settings(self, **overrides: Any) -> Settings:
        """Ax3l settings pointing at these databases."""
        # Any: the values are validated by Settings, as they would be from the environment.
        values: dict[str, Any] = {
            key: value for key, value in self.env().items() if not key.startswith("SNAKELAB_")
        }
        return Settings(**{**values, **overrides})

    def env(self) -> dict[str, str]:
        """Environment variables for a subprocess (any service) using these databases."""
        return {
            "DB_HOST": self.host,
            "DB_PORT": str(self.port),
            "DB_USER": self.ax3l_user,
            "DB_PASSWORD": self.ax3l_password,
            "AX3L_DB_NAME": self.ax3l_db,
            "AX3L_SNAKELAB_DB_NAME": self.snakelab_db,
            "SNAKELAB_DB_HOST": self.host,
            "SNAKELAB_DB_PORT": str(self.port),
            "SNAKELAB_DB_USER": self.snakelab_user,
            "SNAKELAB_DB_PASSWORD": self.snakelab_password,
            "SNAKELAB_DB_NAME": self.snakelab_db,
        }

    def connect(self, user: str = "admin", database: str | None = None) -> Any:
        """A blocking autocommit connection as ``admin``, ``ax3l`` or ``snakelab``."""
        credentials = {
            "admin": (self.admin_user, self.admin_password),
            "ax3l": (self.ax3l_user, self.ax3l_password),
            "snakelab": (self.snakelab_user, self.snakelab_password),
        }[user]
        return mysql_connection(self.host, self.port, *credentials, database)

    def query(
        self, sql: str, args: Any = None, user: str = "admin", database: str | None = None
    ) -> list[tuple[Any, ...]]:
        """The rows of one statement, on a connection of its own as ``user``; ``database``
        defaults to SnakeLab's for the ``snakelab`` user and to Ax3l's for the others."""
        if database is None:
            database = self.snakelab_db if user == "snakelab" else self.ax3l_db
        conn = self.connect(user, database)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        finally:
            conn.close()


def mysql_connection(
    host: str, port: int, user: str, password: str, database: str | None = None, **options: Any
) -> Any:
    """A blocking autocommit utf8mb4 connection (``options`` as pymysql takes them)."""
    return pymysql.connect(
        host=host,
        port=port,
        user=user,
        password=password,
        database=database,
        autocommit=True,
        charset="utf8mb4",
        **options,
    )


def admin_connection(values: dict[str, str], database: str | None = None) -> Any:
    """A blocking autocommit connection as the private MariaDB's admin (``db.env`` values)."""
    return mysql_connection(
        values["DB_HOST"],
        int(values["DB_PORT"]),
        values["AX3L_DB_ADMIN_USER"],
        values["AX3L_DB_ADMIN_PASSWORD"],
        database,
    )


def ax3l_settings(values: dict[str, str], ax3l_db: str, snakelab_db: str) -> Settings:
    """Ax3l's settings with its login from ``db.env`` values, on these two databases."""
    # Any: the values are validated by Settings, as they would be from the environment.
    login: dict[str, Any] = {
        key: values[key] for key in ("DB_HOST", "DB_PORT", "DB_USER", "DB_PASSWORD")
    }
    return Settings(**login, AX3L_DB_NAME=ax3l_db, AX3L_SNAKELAB_DB_NAME=snakelab_db)


def private_db_env(repo: Path) -> dict[str, str]:
    """``<repo>/.run/db.env``'s values; the private MariaDB is started first when there is no
    such file yet (how the benchmarks find their database)."""
    env_file = repo / ".run" / "db.env"
    if not env_file.exists():
        subprocess.run([str(repo / "scripts" / "mariadb.sh"), "start"], check=True)
    return read_env_file(env_file)


@contextlib.contextmanager
def throwaway_databases(repo: Path) -> Iterator[TestDatabases]:
    """A fresh ax3l/snakelab database pair with the real grants on ``repo``'s private MariaDB
    (started first), dropped afterwards (the benchmarks')."""
    subprocess.run([str(repo / "scripts" / "mariadb.sh"), "start"], check=True)
    with scratch_databases(read_env_file(repo / ".run" / "db.env"), prefix="b") as dbs:
        yield dbs


def create_snakelab_tables(databases: TestDatabases) -> None:
    """SnakeLab's tables, as the reference SnakeLab creates them, for tests without a server."""
    conn = databases.connect("snakelab", databases.snakelab_db)
    try:
        with conn.cursor() as cur:
            for table in SNAKELAB_TABLES:
                cur.execute(ddl(table))
    finally:
        conn.close()


# A grant of ``created_databases``: privileges, database, user (from any host).
Grant = tuple[str, str, str]


@contextlib.contextmanager
def created_databases(
    db_env: dict[str, str], names: Sequence[str], grants: Sequence[Grant], keep: bool = False
) -> Iterator[None]:
    """Empty databases ``names`` on the private MariaDB (``db.env`` values) with ``grants``;
    dropped and the grants revoked afterwards, unless ``keep``."""
    admin = admin_connection(db_env)
    try:
        with admin.cursor() as cur:
            for name in names:
                cur.execute(
                    f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
                )
            for privileges, database, user in grants:
                cur.execute(f"GRANT {privileges} ON `{database}`.* TO '{user}'@'%'")
        yield
    finally:
        if not keep:
            with admin.cursor() as cur:
                for name in names:
                    cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
                for privileges, database, user in grants:
                    with contextlib.suppress(pymysql.err.MySQLError):  # never granted
                        cur.execute(f"REVOKE {privileges} ON `{database}`.* FROM '{user}'@'%'")
        admin.close()


@contextlib.contextmanager
def scratch_databases(
    db_env: dict[str, str],
    prefix: str = "t",
    with_snakelab_tables: bool = False,
    keep: bool = False,
) -> Iterator[TestDatabases]:
    """A fresh ``ax3l_*`` database (schema created) and ``snakelab_*`` one, dropped after
    (unless ``keep``: a benchmark's ``--keep``).

    The grants are the real ones: Ax3l's user may only SELECT SnakeLab's tables.
    """
    suffix = f"{prefix}{secrets.token_hex(4)}"
    dbs = TestDatabases.from_env(db_env, f"ax3l_{suffix}", f"snakelab_{suffix}")
    grants = [
        ("ALL PRIVILEGES", dbs.ax3l_db, dbs.ax3l_user),
        ("SELECT", dbs.snakelab_db, dbs.ax3l_user),
        ("ALL PRIVILEGES", dbs.snakelab_db, dbs.snakelab_user),
    ]
    with created_databases(db_env, (dbs.ax3l_db, dbs.snakelab_db), grants, keep):
        ensure_schema(dbs.settings())
        if with_snakelab_tables:
            create_snakelab_tables(dbs)
        yield dbs


ADMIN_KEYS = ("AX3L_DB_ADMIN_USER", "AX3L_DB_ADMIN_PASSWORD")


def compare_environment(databases: TestDatabases, db_env: dict[str, str] | None) -> dict[str, str]:
    """``ax3l-compare``'s (or ``ax3l-db``'s) environment in a test: this process's without any
    Ax3l, database or SnakeLab setting, the test's databases (results go to its Ax3l database)
    and the private MariaDB's admin login (``db_env``; None: none) for the repeats' throwaway
    databases."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DB_", "AX3L_", "SNAKELAB_"))}
    env.update(databases.env())
    if db_env is not None:
        env.update({k: db_env[k] for k in ADMIN_KEYS})
    return env


def run_module(
    module: str, *args: str, env: dict[str, str], timeout: float | None = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` as a user runs the command, with exactly ``env``; its output
    as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextlib.contextmanager
def seats_login(databases: TestDatabases) -> Iterator[tuple[str, str]]:
    """A seats' endpoint login of its own for these databases, made as ``make run`` makes it:
    the administrator creates it with SELECT on SnakeLab's database, and ``ax3l-db create``, as
    Ax3l's user holding its database WITH GRANT OPTION, gives it its tables (checked by the
    summary it prints). A password with a quote and a backslash. Dropped after."""
    user, password = f"seats_{secrets.token_hex(4)}", f"p'w\\{secrets.token_hex(8)}"
    settings = databases.settings(AX3L_SEATS_DB_USER=user, AX3L_SEATS_DB_PASSWORD=password)
    ax3l = f"`{databases.ax3l_db}`.* TO '{databases.ax3l_user}'@'%'"
    admin = databases.connect("admin")
    try:
        with admin.cursor() as cur:
            for statement in seats_grants(settings, user, password)[:2]:
                cur.execute(statement)
            cur.execute(f"GRANT ALL PRIVILEGES ON {ax3l} WITH GRANT OPTION")
        summary = ensure_schema(settings)
        expected = f"the seats' endpoint user {user} may read seats, and write nothing"
        assert summary.endswith(expected), summary
        yield user, password
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
            cur.execute(f"REVOKE GRANT OPTION ON {ax3l.replace(' TO ', ' FROM ')}")
        admin.close()
