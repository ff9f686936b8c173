"""``ax3l-db``: create or check Ax3l's tables, wipe experiment events on request, and print the
grants of the report server's SELECT-only user; ``backup`` and ``restore`` are
``ax3l.shared.db.backup``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pymysql

from ax3l.shared.db import run_provenance, tables, upgrades
from ax3l.shared.db.database import Database, quote_identifier
from ax3l.shared.db.errors import DatabaseError, SchemaMismatch, translate
from ax3l.shared.settings import DbSettings, SeatsServiceSettings, Settings, get_settings


def login_arguments(settings: DbSettings) -> dict[str, Any]:
    """``pymysql.connect``'s arguments for Ax3l's user on the configured server (utf8mb4,
    autocommit), without the database."""
    return {
        "host": settings.db_host,
        "port": settings.db_port,
        "user": settings.db_user,
        "password": settings.db_password.get_secret_value(),
        "charset": "utf8mb4",
        "autocommit": True,
    }


def connect(settings: DbSettings) -> Any:
    """A plain (blocking) connection to Ax3l's database, for administration."""
    try:
        return pymysql.connect(
            **login_arguments(settings),
            database=settings.db_name,
            connect_timeout=min(10, max(1, round(settings.db_acquire_timeout))),
            read_timeout=settings.db_query_timeout,
            write_timeout=settings.db_query_timeout,
        )
    except pymysql.err.MySQLError as exc:
        raise translate(
            exc, f"connecting to {settings.db_host}:{settings.db_port}/{settings.db_name}"
        ) from exc


@contextlib.contextmanager
def _cursor(settings: DbSettings, doing: str) -> Iterator[Any]:
    """A cursor on a connection of its own (``connect``), closed afterwards; a driver error
    while ``doing`` comes out as a domain error."""
    with contextlib.closing(connect(settings)) as conn:
        try:
            with conn.cursor() as cur:
                yield cur
        except pymysql.err.MySQLError as exc:
            raise translate(exc, doing) from exc


def _existing_tables(cur: Any) -> set[str]:
    cur.execute("SHOW TABLES")
    return {row[0] for row in cur.fetchall()}


def _columns(cur: Any, table: str) -> dict[str, str]:
    cur.execute(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = DATABASE() AND table_name = %s",
        (table,),
    )
    return {str(name).lower(): str(kind).lower() for name, kind in cur.fetchall()}


def _indexes(cur: Any, table: str) -> set[str]:
    cur.execute(
        "SELECT DISTINCT index_name FROM information_schema.statistics"
        " WHERE table_schema = DATABASE() AND table_name = %s",
        (table,),
    )
    return {str(row[0]) for row in cur.fetchall()}


def check_user_tables(cur: Any) -> list[str]:
    """Problems with existing user tables (missing columns); empty when they fit."""
    problems = []
    present = _existing_tables(cur)
    for table, expected in tables.EXPECTED_COLUMNS.items():
        if table not in present:
            continue
        actual = _columns(cur, table)
        for column, kind in expected.items():
            if column not in actual:
                problems.append(f"table {table} has no column {column}")
            elif not actual[column].startswith(kind):
                problems.append(f"{table}.{column} is {actual[column]}, expected {kind}")
    return problems


def ensure_schema(settings: DbSettings) -> str:
    """Create what is missing at this Ax3l's schema revision; refuse a database at another one
    (``upgrades.SchemaBehind`` names ``ax3l-db upgrade``); returns a summary. A configured
    seats' endpoint user (``AX3L_SEATS_DB_USER``) gets its grants on the tables then."""
    with (
        _cursor(settings, "creating the schema") as cur,
        upgrades.schema_lock(cur, lock_wait(settings)),
    ):
        present = _existing_tables(cur)
        revision = upgrades.stored_revision(cur, present)
        if revision is not None:
            upgrades.require_current(revision, settings.db_name)
        summary = _create_missing(cur, settings, present, stamp=revision is None)
    granted = grant_seats_tables(settings) if isinstance(settings, SeatsServiceSettings) else None
    return summary if granted is None else f"{summary}; {granted}"


def lock_wait(settings: DbSettings) -> float:
    """How long a schema change waits for another one: within the connection's read timeout."""
    return settings.db_query_timeout * 0.8


def _create_missing(cur: Any, settings: DbSettings, present: set[str], stamp: bool) -> str:
    """Check the user's tables, create the missing tables and indexes of the newest revision,
    and (``stamp``: a database that had no revision) record that revision."""
    problems = check_user_tables(cur)
    if problems:
        raise SchemaMismatch(
            f"database {settings.db_name} has event tables of another schema: "
            + "; ".join(problems)
            + ". Existing tables are not migrated: back up and run"
            " `ax3l-db reset-events --recreate --yes` to recreate them"
        )
    created = []
    for table in (*tables.USER_TABLES, *tables.OWN_TABLES):
        if table.name not in present:
            cur.execute(tables.ddl(table))
            created.append(table.name)
    present_indexes = _indexes(cur, tables.EVENTS.name)
    for index in tables.ADDED_INDEXES:
        if index.name not in present_indexes:
            cur.execute(tables.add_index(index))
    head = upgrades.head()
    if stamp:
        run_provenance.backfill(cur)  # a history the user's system wrote: 0003's back-fill
        upgrades.stamp_head(settings)
    cur.execute(
        "INSERT INTO ax3l_meta (name, value) VALUES ('schema_version', %s)"
        " ON DUPLICATE KEY UPDATE value = VALUES(value)",
        (upgrades.marker(head),),
    )
    if created:
        return f"created tables: {', '.join(created)} (schema revision {head})"
    return f"schema is up to date (revision {head})"


def upgrade_schema(settings: DbSettings) -> str:
    """``ax3l-db upgrade``: apply the pending revisions, then create what is missing."""
    with (
        _cursor(settings, "upgrading the schema") as cur,
        upgrades.schema_lock(cur, lock_wait(settings)),
    ):
        present = _existing_tables(cur)
        revision = upgrades.stored_revision(cur, present)
        if revision is None:
            return _create_missing(cur, settings, present, stamp=True)
        versioned = revision if upgrades.VERSION_TABLE in present else None
        if revision not in upgrades.revisions():
            upgrades.require_current(revision, settings.db_name)
        done = upgrades.upgrade(settings, versioned)
        summary = _create_missing(cur, settings, _existing_tables(cur), stamp=False)
    if not done.applied:
        return summary
    return (
        f"upgraded database {settings.db_name} from revision {revision} to {upgrades.head()}"
        f" ({', '.join(done.applied)}) in {done.seconds:.2f} s; {summary}"
    )


def reset_events(settings: DbSettings, recreate: bool = False) -> str:
    """Delete every experiment event and its score snapshot (or drop and recreate the tables)."""
    with _cursor(settings, "resetting events") as cur:
        present = _existing_tables(cur)
        revision = upgrades.stored_revision(cur, present)
        if revision is not None:
            # Refused before anything is deleted: the reset would end in that refusal, or
            # (recreating) stamp the newest revision over tables no revision brought there.
            upgrades.require_current(revision, settings.db_name)
        for table in tables.EXPERIMENT_TABLES:
            if table in present:
                cur.execute(f"{'DROP TABLE' if recreate else 'DELETE FROM'} {table}")
        if recreate and "ax3l_meta" in present:
            cur.execute("DELETE FROM ax3l_meta")
        # Intents point at golden events that this reset deletes: adopting one later would
        # log a proposal against a history that no longer exists.
        if "submission_intents" in present:
            cur.execute("DELETE FROM submission_intents")
    summary = ensure_schema(settings)
    return f"experiment events deleted; {summary}"


def adopt_command(settings: Settings, dry_run: bool) -> int:
    """``ax3l-db adopt [--dry-run]``: print the adoption (planned, written, or found)."""
    from ax3l.shared.config_schema import SchemaFileError, load_schema
    from ax3l.shared.crash_points import arm, armed_points
    from ax3l.shared.db import adopt

    arm(armed_points())
    if not dry_run:
        ensure_schema(settings)
    try:
        schema = load_schema(settings.schema_path)
        adoption = asyncio.run(adopt.run(settings, schema, dry_run))
    except (SchemaFileError, adopt.AdoptionRefused) as exc:
        print(f"ax3l-db: adopt: {exc}", file=sys.stderr)
        return 1
    for line in adoption.describe():
        print(line)
    if adoption.already:
        print(f"Already adopted (event {adoption.event_id}): nothing written.")
    elif dry_run:
        print("Dry run: nothing written.")
    else:
        print(f"Adopted: golden_config_created event {adoption.event_id}.")
    return 0


def annotate_command(settings: Settings, args: argparse.Namespace) -> int:
    """``ax3l-db note RUN TEXT`` and ``ax3l-db tag RUN TAG... [--remove TAG]``."""
    from ax3l.shared import run_notes

    async def write() -> str:
        async with Database(settings) as db:
            if args.command == "note":
                event = await run_notes.add_note(db, args.run_id, args.text)
                return f"note added to run {args.run_id} (event {event})"
            events = await run_notes.change_tags(db, args.run_id, args.tags, args.remove)
            return f"run {args.run_id}: {len(events)} tag change(s) written"

    try:
        print(asyncio.run(write()))
    except run_notes.NoteRefused as exc:
        print(f"ax3l-db: {args.command}: {exc}", file=sys.stderr)
        return 2
    except DatabaseError as exc:
        print(f"ax3l-db: {exc}", file=sys.stderr)
        return 1
    return 0


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _account(user: str, host: str) -> str:
    return f"{_sql_string(user)}@{_sql_string(host)}"


def _create_user(account: str, password: str | None) -> list[str]:
    """The statement creating ``account`` when missing, if a password is given (else none)."""
    if password is None:
        return []
    return [f"CREATE USER IF NOT EXISTS {account} IDENTIFIED BY {_sql_string(password)}"]


def reports_grants(
    settings: Settings, user: str, password: str | None = None, host: str = "%"
) -> list[str]:
    """The statements that give the report server its SELECT-only login on both databases.

    With a password the user is created when missing; without one it must exist already.
    """
    account = _account(user, host)
    statements = _create_user(account, password)
    for database in (settings.db_name, settings.snakelab_db_name):
        statements.append(f"GRANT SELECT ON {quote_identifier(database)}.* TO {account}")
    return statements


# What the seats' endpoint process may do in Ax3l's database, table by table: read the seats'
# token hashes. In SnakeLab's: SELECT. It writes no event: the orchestrator writes the seats'
# (the endpoint parses the internet's requests; the loop trusts the events).
SEATS_TABLE_GRANTS = (("SELECT", "seats"),)
# What an earlier Ax3l granted it, taken back by `ax3l-db create`.
SEATS_REVOKED = (("INSERT", "events"), ("INSERT", "event_messages"))


def seats_table_grants(settings: SeatsServiceSettings, user: str, host: str = "%") -> list[str]:
    """The grants of the seats' endpoint on Ax3l's tables (they must exist: ``ax3l-db create``
    first)."""
    account = _account(user, host)
    database = quote_identifier(settings.db_name)
    return [
        f"GRANT {privilege} ON {database}.{quote_identifier(table)} TO {account}"
        for privilege, table in SEATS_TABLE_GRANTS
    ]


def seats_grants(
    settings: Settings, user: str, password: str | None = None, host: str = "%"
) -> list[str]:
    """The statements that give the seats' endpoint its login: SELECT on ``seats`` and on
    SnakeLab's database, nothing more.

    With a password the user is created when missing; without one it must exist already.
    """
    account = _account(user, host)
    statements = _create_user(account, password)
    snakelab = quote_identifier(settings.snakelab_db_name)
    statements.append(f"GRANT SELECT ON {snakelab}.* TO {account}")
    return statements + seats_table_grants(settings, user, host)


def grant_seats_tables(settings: SeatsServiceSettings) -> str | None:
    """Give the configured seats' user (``AX3L_SEATS_DB_USER``) its grants on Ax3l's tables,
    as Ax3l's user (it holds them WITH GRANT OPTION where ``scripts/mariadb.sh`` or compose made
    it); a sentence saying so, or why not (None: no seats' user configured)."""
    user = settings.seats_db_user
    if not user:
        return None
    try:
        with contextlib.closing(connect(settings)) as conn, conn.cursor() as cur:
            for statement in seats_table_grants(settings, user):
                cur.execute(statement)
            revoke_earlier_seats_grants(cur, settings, user)
    except pymysql.err.MySQLError as exc:
        return (
            f"the seats' endpoint user {user} could not be granted its tables ({exc.args[-1]});"
            " run `ax3l-db grant-seats | mariadb -uroot -p` as an administrator"
        )
    return f"the seats' endpoint user {user} may read seats, and write nothing"


def revoke_earlier_seats_grants(cur: Any, settings: SeatsServiceSettings, user: str) -> None:
    """Take back what an earlier Ax3l granted the seats' user (``SEATS_REVOKED``); a grant it
    does not hold is no error."""
    database = quote_identifier(settings.db_name)
    for privilege, table in SEATS_REVOKED:
        try:
            cur.execute(
                f"REVOKE {privilege} ON {database}.{quote_identifier(table)}"
                f" FROM {_account(user, '%')}"
            )
        except pymysql.err.OperationalError as exc:
            if exc.args[0] not in (1141, 1147):  # there is no such grant
                raise


# -- throwaway databases (``ax3l-compare``'s repeats; on the admin login's cursor) ------------

Grant = tuple[str, str, str]  # privileges, database, user


def accounts(cur: Any, user: str) -> list[str]:
    """The user's accounts (``'user'@'host'``); ``'%'`` when mysql.user cannot be read."""
    try:
        cur.execute("SELECT host FROM mysql.user WHERE user = %s", (user,))
        hosts = [str(row[0]) for row in cur.fetchall()]
    except pymysql.err.MySQLError:
        hosts = []
    return [_account(user, host) for host in hosts or ["%"]]


def database_names(cur: Any) -> set[str]:
    """Every database on the server the login may see."""
    cur.execute("SHOW DATABASES")
    return {str(row[0]) for row in cur.fetchall()}


def create_databases(cur: Any, names: Sequence[str], grants: Sequence[Grant]) -> None:
    """Create ``names`` (utf8mb4) and give each of ``grants`` to every account of its user."""
    granted = [(p, d, account) for p, d, user in grants for account in accounts(cur, user)]
    for name in names:
        cur.execute(
            f"CREATE DATABASE {quote_identifier(name)}"
            " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
        )
    for privileges, database, account in granted:
        cur.execute(f"GRANT {privileges} ON {quote_identifier(database)}.* TO {account}")


def drop_databases(cur: Any, names: Sequence[str], grants: Sequence[Grant]) -> None:
    """Drop ``names`` (each may be missing) and take ``grants`` back (one never given is no
    error)."""
    for name in names:
        cur.execute(f"DROP DATABASE IF EXISTS {quote_identifier(name)}")
    for privileges, database, user in grants:
        for account in accounts(cur, user):
            with contextlib.suppress(pymysql.err.MySQLError):  # never granted
                cur.execute(f"REVOKE {privileges} ON {quote_identifier(database)}.* FROM {account}")


class Login(NamedTuple):
    """A login ``ax3l-db`` prints the grants of: its user's variable and default, its
    password's variable, the statements, and what ``--help`` says of it."""

    user_env: str
    default_user: str
    password_env: str
    grants: Callable[[Settings, str, str | None, str], list[str]]
    help: str


LOGINS = {
    "grant-reports": Login(
        "AX3L_REPORTS_DB_USER",
        "ax3l_reports",
        "AX3L_REPORTS_DB_PASSWORD",
        reports_grants,
        "print the SQL that creates the report server's SELECT-only user (run it as an"
        " administrator, e.g. `ax3l-db grant-reports | mysql -uroot -p`)",
    ),
    "grant-seats": Login(
        "AX3L_SEATS_DB_USER",
        "ax3l_seats",
        "AX3L_SEATS_DB_PASSWORD",
        seats_grants,
        "print the SQL that creates the seats' endpoint's user (SELECT on seats and on"
        " SnakeLab's tables, nothing more; run it as an administrator after `ax3l-db"
        " create`, e.g. `ax3l-db grant-seats | mysql -uroot -p`)",
    ),
}


def print_grants(settings: Settings, command: str, user: str | None, host: str) -> None:
    """``ax3l-db grant-reports`` or ``grant-seats``: print the statements."""
    login = LOGINS[command]
    user = user or os.environ.get(login.user_env) or login.default_user
    for statement in login.grants(settings, user, os.environ.get(login.password_env), host):
        print(statement + ";")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ax3l-db", description="Create or check Ax3l's database schema."
    )
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("create", help="create missing tables and indexes, check existing ones")
    sub.add_parser("check", help="same as create (idempotent)")
    sub.add_parser(
        "upgrade",
        help="bring the database to this Ax3l's schema revision, keeping the experiment (stop"
        " the services and back up first)",
    )
    adopt_parser = sub.add_parser(
        "adopt",
        help="take SnakeLab's existing runs as the experiment's past: the best completed run of"
        " the newest seed becomes the golden configuration",
    )
    adopt_parser.add_argument(
        "--dry-run", action="store_true", help="print what would be adopted, write nothing"
    )
    reset = sub.add_parser(
        "reset-events",
        help="delete all experiment events and score snapshots (needed when the order changes)",
    )
    reset.add_argument("--yes", action="store_true", help="confirm: the history is deleted")
    reset.add_argument(
        "--recreate", action="store_true", help="drop and recreate the event tables as well"
    )
    for command, login in LOGINS.items():
        grant = sub.add_parser(command, help=login.help)
        grant.add_argument(
            "user",
            nargs="?",
            help=f"the user (default ${login.user_env}, else {login.default_user}); its password"
            f" comes from ${login.password_env} (unset: the user must exist)",
        )
        grant.add_argument("--host", default="%", help="the account's host part (default %%)")
    note = sub.add_parser(
        "note", help="add a note to a run (a golden configuration's: its run's); an event"
    )
    note.add_argument("run_id", help="SnakeLab's run id")
    note.add_argument("text", help="the note (at most 2,000 characters)")
    tag = sub.add_parser(
        "tag", help="put tags on a run and (--remove) take tags off it; an event each"
    )
    tag.add_argument("run_id", help="SnakeLab's run id")
    tag.add_argument("tags", nargs="*", help="tags to put on (letters, digits, _ . : -)")
    tag.add_argument("--remove", action="append", default=[], metavar="TAG", help="take off")
    export = sub.add_parser(
        "export", help="write the experiment's runs elsewhere (Optuna: ax3l-shared[optuna])"
    )
    export.add_argument(
        "--optuna", metavar="STORAGE_URL", required=True, help="an Optuna storage URL"
    )
    export.add_argument("--study", help="the study's name (default the Ax3l database's name)")
    backup = sub.add_parser(
        "backup",
        help="save both databases (Ax3l's and SnakeLab's, one consistent snapshot) into a new"
        " directory; the stack may run (needs AX3L_DB_ADMIN_USER and AX3L_DB_ADMIN_PASSWORD)",
    )
    backup.add_argument("path", type=Path, help="the new (or empty) directory")
    restore = sub.add_parser(
        "restore",
        help="bring a backup into AX3L_DB_NAME and AX3L_SNAKELAB_DB_NAME, whole or not at all;"
        " refused while the stack runs (needs the admin login)",
    )
    restore.add_argument("path", type=Path, help="a directory `ax3l-db backup` wrote")
    restore.add_argument(
        "--replace",
        action="store_true",
        help="replace the experiment the databases hold (without it they must be empty)",
    )
    args = parser.parse_args(argv)
    if args.command in ("backup", "restore"):
        from ax3l.shared.db import backup as backups

        if args.command == "backup":
            return backups.backup_command(args.path)
        return backups.restore_command(args.path, args.replace)
    settings = get_settings()
    if args.command == "export":
        from ax3l.shared.db.export_optuna import run_export

        return run_export(settings, args.optuna, args.study, connect)
    if args.command in LOGINS:
        print_grants(settings, args.command, args.user, args.host)
        return 0
    if args.command in ("note", "tag"):
        return annotate_command(settings, args)
    try:
        if args.command == "reset-events":
            if not args.yes:
                print(
                    "ax3l-db: reset-events deletes every experiment event and score snapshot;"
                    " run again with --yes to confirm",
                    file=sys.stderr,
                )
                return 2
            print(reset_events(settings, recreate=args.recreate))
        elif args.command == "upgrade":
            print(upgrade_schema(settings))
        elif args.command == "adopt":
            return adopt_command(settings, args.dry_run)
        else:
            print(ensure_schema(settings))
    except DatabaseError as exc:
        print(f"ax3l-db: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
