"""Which schema revision Ax3l's database is at, and ``ax3l-db upgrade``: alembic migrations.

The revisions are alembic scripts in ``migrations/versions/``, oldest first. A database records
its revision in ``ax3l_alembic_version``. A release-1 database (tables made by
``CREATE TABLE IF NOT EXISTS``, ``ax3l_meta.schema_version = '1'``, no revision table) is read
as revision 0001. An empty database, or one with only the user's own three tables, is created
at the newest revision directly (``ax3l.shared.db.cli.ensure_schema``) and stamped.

A database behind the newest revision is refused by every service at start with
``SchemaBehind``, whose message names ``ax3l-db upgrade``; one ahead of it (written by a newer
Ax3l) with ``SchemaMismatch``. ``ax3l.shared.db.tables`` describes the newest revision; a
change to an existing table needs a revision here, a new table of Ax3l's own does not (it is
created at start). Each revision runs in its own transaction with its version row, and is
written so that running it again after a kill mid-way is harmless (MySQL commits DDL at once).

``ax3l_meta.schema_version`` keeps the newest revision's number ('2' for 0002): release 1
refuses any value but '1', so an upgraded database is safe from an older Ax3l.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ax3l.shared.db.errors import DatabaseError, DatabaseTimeout, SchemaMismatch
from ax3l.shared.settings import DbSettings

VERSION_TABLE = "ax3l_alembic_version"
SCRIPT_LOCATION = Path(__file__).with_name("migrations")
# ``ax3l_meta.schema_version`` of releases before revisions, and the revision each one is.
LEGACY_VERSIONS = {"1": "0001"}
# One schema change at a time across processes (services starting together, an upgrade).
LOCK_NAME = "ax3l_schema"


class SchemaBehind(SchemaMismatch):
    """The database is at an older revision: ``ax3l-db upgrade`` brings it to this Ax3l's."""


def _config() -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    return config


@cache
def revisions() -> tuple[str, ...]:
    """Every revision, oldest first."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(_config())
    return tuple(reversed([script.revision for script in scripts.walk_revisions()]))


def head() -> str:
    """The newest revision: the schema ``ax3l.shared.db.tables`` describes."""
    return revisions()[-1]


def marker(revision: str) -> str:
    """``ax3l_meta.schema_version`` at ``revision`` ('2' for 0002)."""
    return str(int(revision))


def stored_revision(cur: Any, present: set[str]) -> str | None:
    """The revision of the database ``cur`` is connected to (tables ``present``), or None when
    it has none yet (empty, or only the user's own tables). An unknown version row raises
    ``SchemaMismatch``."""
    if VERSION_TABLE in present:
        cur.execute(f"SELECT version_num FROM {VERSION_TABLE}")
        rows = cur.fetchall()
        if len(rows) == 1:
            return str(rows[0][0])
        if rows:
            raise SchemaMismatch(
                f"{VERSION_TABLE} has {len(rows)} rows; a database has one revision"
            )
    if "ax3l_meta" in present:
        cur.execute("SELECT value FROM ax3l_meta WHERE name = 'schema_version'")
        row = cur.fetchone()
        if row is not None:
            legacy = LEGACY_VERSIONS.get(str(row[0]))
            if legacy is None:
                raise SchemaMismatch(
                    f"ax3l_meta says schema version {row[0]} but {VERSION_TABLE} is missing:"
                    " this database was not made by Ax3l, or a newer Ax3l made it"
                )
            return legacy
    return None


def require_current(revision: str, database: str) -> None:
    """Raise unless ``revision`` is this Ax3l's: ``SchemaBehind`` for an older one (naming the
    command), ``SchemaMismatch`` for one this Ax3l does not know (a newer Ax3l's)."""
    known = revisions()
    if revision == known[-1]:
        return
    if revision in known:
        raise SchemaBehind(
            f"database {database} is at Ax3l schema revision {revision}, this Ax3l needs"
            f" {known[-1]}: stop Ax3l's services, back the database up, and run"
            " `ax3l-db upgrade` (the experiment is kept)"
        )
    raise SchemaMismatch(
        f"database {database} is at Ax3l schema revision {revision}, which this Ax3l does not"
        f" know (its newest is {known[-1]}): a newer Ax3l wrote it; run that version"
    )


@contextlib.contextmanager
def schema_lock(cur: Any, wait: float) -> Iterator[None]:
    """Hold the server's named lock for schema changes (released on disconnect too); after
    ``wait`` seconds without it, ``DatabaseTimeout`` (a wait the services retry)."""
    seconds = max(1, int(wait))
    cur.execute("SELECT GET_LOCK(%s, %s)", (LOCK_NAME, seconds))
    row = cur.fetchone()
    if not row or row[0] != 1:
        raise DatabaseTimeout(
            f"another process held the schema lock for {seconds} s"
            " (an `ax3l-db upgrade` still running?)"
        )
    try:
        yield
    finally:
        cur.execute("SELECT RELEASE_LOCK(%s)", (LOCK_NAME,))
        cur.fetchall()


def _engine(settings: DbSettings) -> Any:
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    url = sqlalchemy.engine.URL.create(
        "mysql+pymysql",
        username=settings.db_user,
        password=settings.db_password.get_secret_value(),
        host=settings.db_host,
        port=settings.db_port,
        database=settings.db_name,
        query={"charset": "utf8mb4"},
    )
    return sqlalchemy.create_engine(url, poolclass=NullPool)


def _run(settings: DbSettings, action: str, revision: str) -> None:
    """Run alembic's ``upgrade`` or ``stamp`` to ``revision`` on a connection of its own."""
    from alembic import command

    config = _config()
    engine = _engine(settings)
    try:
        with engine.connect() as connection:
            config.attributes["connection"] = connection
            getattr(command, action)(config, revision)
            connection.commit()
    except Exception as exc:
        raise DatabaseError(f"{action} to revision {revision}: {exc}") from exc
    finally:
        engine.dispose()


def stamp_head(settings: DbSettings) -> None:
    """Record the newest revision (for a database just created at it), quietly: services do
    this at their first start and alembic's INFO lines would only fill their logs."""
    quiet = logging.getLogger("alembic")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        _run(settings, "stamp", head())
    finally:
        quiet.setLevel(level)


@dataclass(frozen=True)
class Upgrade:
    """What ``upgrade`` did: the version table's revision before (None: it had none), the
    revisions applied, how long they took."""

    before: str | None
    applied: tuple[str, ...]
    seconds: float


def upgrade(settings: DbSettings, versioned: str | None) -> Upgrade:
    """Apply every revision after ``versioned``, the revision in the version table (None for a
    release-1 database: from the first, which checks that it is one); the caller holds
    ``schema_lock``."""
    known = revisions()
    pending = known if versioned is None else known[known.index(versioned) + 1 :]
    began = time.monotonic()
    if pending:
        _run(settings, "upgrade", head())
    return Upgrade(versioned, tuple(pending), time.monotonic() - began)
