"""A repeat's own pair of databases (``ax3l_cmp<hex>``, ``snakelab_cmp<hex>``), dropped after.

They are made with the admin login (``AX3L_DB_ADMIN_USER``), which stays in this process. The
grants are the real ones: Ax3l's user gets all rights on its database and only ``SELECT`` on
SnakeLab's, SnakeLab's user all rights on SnakeLab's; they are revoked when the pair is dropped.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pymysql

from ax3l.compare.settings import CompareSettings
from ax3l.shared.db.cli import ensure_schema, login_arguments
from ax3l.shared.db.database import quote_identifier


class AdminLoginMissing(RuntimeError):
    """No login that may create databases was configured."""


@dataclass(frozen=True)
class RepeatDatabases:
    """One repeat's database pair and the logins of the services that use it."""

    settings: CompareSettings  # Ax3l's login, pointed at this pair (both database names)
    ax3l_db: str
    snakelab_db: str

    def ax3l_env(self) -> dict[str, str]:
        """``DB_*`` for the toolbroker and the orchestrator (Ax3l's login only)."""
        s = self.settings
        return {
            **self._login("DB_", s.db_user, s.db_password.get_secret_value()),
            "AX3L_DB_NAME": self.ax3l_db,
            "AX3L_SNAKELAB_DB_NAME": self.snakelab_db,
        }

    def snakelab_env(self) -> dict[str, str]:
        """``SNAKELAB_DB_*`` for the reference SnakeLab (SnakeLab's login only)."""
        s = self.settings
        login = self._login(
            "SNAKELAB_DB_", s.snakelab_db_user, s.snakelab_db_password.get_secret_value()
        )
        return {**login, "SNAKELAB_DB_NAME": self.snakelab_db}

    def _login(self, prefix: str, user: str, password: str) -> dict[str, str]:
        """``<prefix>HOST``, ``PORT``, ``USER`` and ``PASSWORD`` of this server."""
        s = self.settings
        values = {"HOST": s.db_host, "PORT": str(s.db_port), "USER": user, "PASSWORD": password}
        return {prefix + key: value for key, value in values.items()}

    def connect(self) -> Any:
        """A blocking autocommit connection as Ax3l's user (reads both databases)."""
        return pymysql.connect(**login_arguments(self.settings), database=self.ax3l_db)


def admin_connection(settings: CompareSettings) -> Any:
    if not settings.admin_user:
        raise AdminLoginMissing(
            "ax3l-compare makes throwaway databases for each repeat and needs a login that may"
            " create databases and grant on them: set AX3L_DB_ADMIN_USER and"
            " AX3L_DB_ADMIN_PASSWORD (the private MariaDB's are in .run/db.env: --db-env"
            " .run/db.env)"
        )
    return pymysql.connect(
        host=settings.db_host,
        port=settings.db_port,
        user=settings.admin_user,
        password=settings.admin_password.get_secret_value(),
        autocommit=True,
    )


def _accounts(cur: Any, user: str) -> list[str]:
    """The user's accounts (``'user'@'host'``); ``'%'`` when mysql.user cannot be read."""
    try:
        cur.execute("SELECT host FROM mysql.user WHERE user = %s", (user,))
        hosts = [str(row[0]) for row in cur.fetchall()]
    except pymysql.err.MySQLError:
        hosts = []
    return [f"'{user}'@'{host}'" for host in hosts or ["%"]]


def _grants(
    settings: CompareSettings, ax3l_db: str, snakelab_db: str
) -> list[tuple[str, str, str]]:
    """(privileges, database, user) of a pair."""
    return [
        ("ALL PRIVILEGES", ax3l_db, settings.db_user),
        ("SELECT", snakelab_db, settings.db_user),
        ("ALL PRIVILEGES", snakelab_db, settings.snakelab_db_user),
    ]


@contextlib.contextmanager
def repeat_databases(settings: CompareSettings) -> Iterator[RepeatDatabases]:
    """A fresh pair with the real grants and Ax3l's schema created; dropped afterwards."""
    suffix = f"cmp{secrets.token_hex(4)}"
    pair = RepeatDatabases(
        settings.model_copy(
            update={"db_name": f"ax3l_{suffix}", "snakelab_db_name": f"snakelab_{suffix}"}
        ),
        f"ax3l_{suffix}",
        f"snakelab_{suffix}",
    )
    admin = admin_connection(settings)
    try:
        with admin.cursor() as cur:
            grants = [
                (privileges, database, account)
                for privileges, database, user in _grants(settings, pair.ax3l_db, pair.snakelab_db)
                for account in _accounts(cur, user)
            ]
            for name in (pair.ax3l_db, pair.snakelab_db):
                cur.execute(
                    f"CREATE DATABASE {quote_identifier(name)}"
                    " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
                )
            for privileges, database, account in grants:
                cur.execute(f"GRANT {privileges} ON {quote_identifier(database)}.* TO {account}")
        ensure_schema(pair.settings)
        yield pair
    finally:
        with admin.cursor() as cur:
            for name in (pair.ax3l_db, pair.snakelab_db):
                cur.execute(f"DROP DATABASE IF EXISTS {quote_identifier(name)}")
            for privileges, database, user in _grants(settings, pair.ax3l_db, pair.snakelab_db):
                for account in _accounts(cur, user):
                    with contextlib.suppress(pymysql.err.MySQLError):  # never granted
                        cur.execute(
                            f"REVOKE {privileges} ON {quote_identifier(database)}.* FROM {account}"
                        )
        admin.close()
