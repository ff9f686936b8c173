"""A repeat's own pair of databases (``ax3l_<prefix><hex>``, ``snakelab_<prefix><hex>``),
dropped after.

They are made with the admin login (``AX3L_DB_ADMIN_USER``), which stays in ``ax3l-compare``
(and, under ``--ray``, in the repeat's task). The grants are the real ones: Ax3l's user gets all
rights on its database and only ``SELECT`` on SnakeLab's, SnakeLab's user all rights on
SnakeLab's; they are revoked when the pair is dropped.

A comparison names its pairs ``cmp<comparison token>r<slot>t<hex>`` (``pair_prefix``): the
token is drawn once per comparison, the slot is the repeat's place in the comparison's plan and
the hex is drawn per attempt. A repeat that starts again (its Ray task re-run after its node was
lost) drops the pairs of its earlier attempts first (``drop_earlier``), and the comparison drops
whatever pair of its own is left at its end (``drop_pairs``: a task killed before it could
drop its own).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from ax3l.compare.settings import CompareSettings
from ax3l.shared.db.cli import (
    Grant,
    create_databases,
    database_names,
    drop_databases,
    ensure_schema,
    login_arguments,
)


class AdminLoginMissing(RuntimeError):
    """No login that may create databases was configured."""


@dataclass(frozen=True)
class RepeatDatabases:
    """One repeat's database pair and the logins of the services that use it."""

    settings: CompareSettings  # Ax3l's login, pointed at this pair (both database names)
    ax3l_db: str
    snakelab_db: str
    dropped_earlier: int = 0  # pairs of earlier attempts of the same repeat dropped first

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


def _grants(settings: CompareSettings, ax3l_db: str, snakelab_db: str) -> list[Grant]:
    """(privileges, database, user) of a pair."""
    return [
        ("ALL PRIVILEGES", ax3l_db, settings.db_user),
        ("SELECT", snakelab_db, settings.db_user),
        ("ALL PRIVILEGES", snakelab_db, settings.snakelab_db_user),
    ]


AX3L_PREFIX = "ax3l_"
SNAKELAB_PREFIX = "snakelab_"


def comparison_token() -> str:
    """A comparison's part of its pairs' names (``cmp<hex>``), unique across comparisons and
    servers sharing one MySQL (comparison ids are per Ax3l database, so they are not)."""
    return f"cmp{secrets.token_hex(4)}"


def pair_prefix(token: str, slot: int) -> str:
    """What every attempt of the repeat at ``slot`` names its pair with (``<token>r<slot>t``;
    ``r1t`` is no prefix of ``r12t``)."""
    return f"{token}r{slot}t"


def _pairs_named(cur: Any, prefix: str) -> list[tuple[str, str]]:
    """The (ax3l, snakelab) database names on the server that start with ``prefix`` after
    their ``ax3l_``/``snakelab_`` (one of the two may be gone already)."""
    suffixes = {
        name[len(start) :]
        for name in database_names(cur)
        for start in (AX3L_PREFIX, SNAKELAB_PREFIX)
        if name.startswith(start + prefix)
    }
    return [(AX3L_PREFIX + s, SNAKELAB_PREFIX + s) for s in sorted(suffixes)]


def _drop(cur: Any, settings: CompareSettings, ax3l_db: str, snakelab_db: str) -> None:
    """Drop a pair (either may be missing) and revoke its grants."""
    drop_databases(cur, (ax3l_db, snakelab_db), _grants(settings, ax3l_db, snakelab_db))


def drop_pairs(settings: CompareSettings, prefix: str) -> list[str]:
    """Drop every pair whose names start with ``prefix`` (a comparison's token: what its
    repeats left); returns the Ax3l databases' names."""
    admin = admin_connection(settings)
    try:
        with admin.cursor() as cur:
            pairs = _pairs_named(cur, prefix)
            for ax3l_db, snakelab_db in pairs:
                _drop(cur, settings, ax3l_db, snakelab_db)
    finally:
        admin.close()
    return [ax3l_db for ax3l_db, _ in pairs]


def pairs_left(settings: CompareSettings, prefix: str) -> Sequence[tuple[str, str]]:
    """The pairs whose names start with ``prefix`` that exist now."""
    admin = admin_connection(settings)
    try:
        with admin.cursor() as cur:
            return _pairs_named(cur, prefix)
    finally:
        admin.close()


@contextlib.contextmanager
def repeat_databases(
    settings: CompareSettings, prefix: str = "cmp", *, drop_earlier: bool = False
) -> Iterator[RepeatDatabases]:
    """A fresh pair with the real grants and Ax3l's schema created; dropped afterwards.

    ``prefix`` starts both names (then 8 random hex digits); with ``drop_earlier`` every pair
    already named with it (an earlier attempt of the same repeat) is dropped first."""
    suffix = f"{prefix}{secrets.token_hex(4)}"
    admin = admin_connection(settings)
    dropped = 0
    try:
        if drop_earlier:
            with admin.cursor() as cur:
                for ax3l_db, snakelab_db in _pairs_named(cur, prefix):
                    _drop(cur, settings, ax3l_db, snakelab_db)
                    dropped += 1
    except BaseException:
        admin.close()
        raise
    pair = RepeatDatabases(
        settings.model_copy(
            update={
                "db_name": f"{AX3L_PREFIX}{suffix}",
                "snakelab_db_name": f"{SNAKELAB_PREFIX}{suffix}",
            }
        ),
        f"{AX3L_PREFIX}{suffix}",
        f"{SNAKELAB_PREFIX}{suffix}",
        dropped,
    )
    try:
        with admin.cursor() as cur:
            names = (pair.ax3l_db, pair.snakelab_db)
            create_databases(cur, names, _grants(settings, *names))
        ensure_schema(pair.settings)
        yield pair
    finally:
        with admin.cursor() as cur:
            _drop(cur, settings, pair.ax3l_db, pair.snakelab_db)
        admin.close()
