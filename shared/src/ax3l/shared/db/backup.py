"""``ax3l-db backup PATH`` and ``ax3l-db restore PATH``: the experiment's two databases (Ax3l's
and SnakeLab's) saved and brought back whole, with MariaDB's own client tools.

A backup is one ``mariadb-dump --single-transaction`` of both databases: one consistent
snapshot (every event and every SnakeLab run as of one instant), taken while the stack runs
and without blocking it. It is a directory, written under a temporary name and renamed into
place when complete, holding ``dump.sql`` (the databases' ``USE`` lines, no ``CREATE DATABASE``)
and ``manifest.json`` (format, source database names, this Ax3l's version and the schema
revision, the dump's size and SHA-256). Nothing in it is a password.

A restore checks the dump against the manifest, refuses a running stack (see
``running_stack``), and refuses databases that hold any row unless ``--replace`` is given. The
manifest's SHA-256 proves the dump whole, not who made it, so a dump is read as data, never as
commands (``check_dump``): it may hold only what ``mariadb-dump`` writes of tables and rows
(``SET`` of session variables, ``DROP TABLE IF EXISTS``, ``CREATE TABLE``, ``LOCK``/``UNLOCK
TABLES``, ``ALTER TABLE ... DISABLE``/``ENABLE KEYS``, ``INSERT``, and its own ``USE`` lines);
a client command (a backslash command, ``system``, ``source``...), any other ``USE``, a
``DEFINER``, ``GRANT``, ``CREATE USER``, a trigger, view or routine, or a table kept outside
the database's files refuses the whole backup before anything is loaded. The client then runs
in its sandbox mode (``--sandbox``, MariaDB 10.5.25, 10.6.18, 10.11.8 and later; MySQL's
``--commands=OFF``; a client without either is refused) and logs in as a login of the restore's
own that may only touch the two staging databases (created for it, dropped afterwards). It
loads the dump into two staging databases and, once loaded, moves their tables into the
configured databases (``AX3L_DB_NAME``, ``AX3L_SNAKELAB_DB_NAME``; they may have other names
than the source's) in one ``RENAME TABLE``, the tables they had going to a trash database that
is then dropped. A failed or interrupted restore thus leaves the databases as they were (and at
most staging databases named ``ax3l_restore_*``). The databases' grants are per database, so
the services' logins apply to the restored tables unchanged.

Both need the admin login (``AX3L_DB_ADMIN_USER``, ``AX3L_DB_ADMIN_PASSWORD``, or their
``_FILE`` variants), which reaches the client tools only through an option file of mode 0600
in a private temporary directory (``--defaults-file``, so no ``~/.my.cnf`` overrides it), never
a command line or the environment; a restore's loading login does the same. Restore only
backups you made.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pymysql
from pydantic_settings import SettingsConfigDict

from ax3l.shared.db import tables, upgrades
from ax3l.shared.db.database import placeholders, quote_identifier
from ax3l.shared.db.errors import DatabaseError, DatabaseMisconfigured, translate
from ax3l.shared.settings import AdminLoginSettings, Settings

FORMAT = "ax3l-backup 1"
DUMP = "dump.sql"
MANIFEST = "manifest.json"
STAGING_PREFIX = "ax3l_restore_"
CHUNK = 1 << 20


class BackupSettings(AdminLoginSettings, Settings):
    """Ax3l's settings plus the admin login that backs up and restores both databases."""

    model_config = SettingsConfigDict(title="BackupSettings")  # its errors read as before


class BackupError(DatabaseMisconfigured):
    """A backup or restore that cannot be done as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Manifest:
    """What ``manifest.json`` records about a backup."""

    ax3l_db: str
    snakelab_db: str
    created_at: str
    ax3l_version: str
    schema_revision: str | None
    dump_bytes: int
    dump_sha256: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "created_at": self.created_at,
            "ax3l_version": self.ax3l_version,
            "schema_revision": self.schema_revision,
            "databases": {"ax3l": self.ax3l_db, "snakelab": self.snakelab_db},
            "dump": {"file": DUMP, "bytes": self.dump_bytes, "sha256": self.dump_sha256},
            "seconds": round(self.seconds, 3),
        }

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        path = folder / MANIFEST
        try:
            data = json.loads(path.read_text())
            if data.get("format") != FORMAT:
                raise BackupError(
                    f"{path}: format {data.get('format')!r}, this Ax3l restores {FORMAT!r}"
                )
            return cls(
                ax3l_db=str(data["databases"]["ax3l"]),
                snakelab_db=str(data["databases"]["snakelab"]),
                created_at=str(data["created_at"]),
                ax3l_version=str(data["ax3l_version"]),
                schema_revision=data.get("schema_revision"),
                dump_bytes=int(data["dump"]["bytes"]),
                dump_sha256=str(data["dump"]["sha256"]),
                seconds=float(data.get("seconds", 0)),
            )
        except FileNotFoundError:
            raise BackupError(f"{folder} is not an Ax3l backup: no {MANIFEST}") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BackupError(f"{path} cannot be read: {type(exc).__name__}: {exc}") from None


# -- the admin login and the client tools ---------------------------------------------------


def admin_login(settings: BackupSettings) -> tuple[str, str]:
    if not settings.admin_user:
        raise BackupError(
            "backup and restore need the admin login: set AX3L_DB_ADMIN_USER and"
            " AX3L_DB_ADMIN_PASSWORD (or AX3L_DB_ADMIN_PASSWORD_FILE); the private MariaDB's are"
            " in .run/db.env"
        )
    return settings.admin_user, settings.admin_password.get_secret_value()


def option_value(text: str) -> str:
    """``text`` as a double-quoted value of a MySQL option file (its escapes)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    for char, escape in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\b", "\\b")):
        escaped = escaped.replace(char, escape)
    return f'"{escaped}"'


@contextlib.contextmanager
def option_file(settings: BackupSettings, login: tuple[str, str] | None = None) -> Iterator[Path]:
    """An option file with the admin login (or ``login``) and the server, mode 0600 in a
    private temporary directory, deleted afterwards: the client tools' only source of the
    password."""
    user, password = login or admin_login(settings)
    with tempfile.TemporaryDirectory(prefix="ax3l-db-") as folder:
        path = Path(folder) / "client.cnf"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(
                "[client]\n"
                f"user={option_value(user)}\n"
                f"password={option_value(password)}\n"
                f"host={option_value(settings.db_host)}\n"
                f"port={settings.db_port}\n"
                "protocol=TCP\n"
                "default-character-set=utf8mb4\n"
            )
        yield path


def tool(*names: str) -> str:
    """The first of ``names`` on PATH (MariaDB's name, then MySQL's)."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise BackupError(
        f"neither {' nor '.join(names)} is installed: install Debian's mariadb-client"
        " (`apt-get install mariadb-client`)"
    )


def tool_environment() -> dict[str, str]:
    """This process's environment without the MySQL client's own variables (MYSQL_PWD,
    MYSQL_HOST...), so only the option file speaks for the login."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MYSQL")}


def admin_connection(settings: BackupSettings, database: str | None = None) -> Any:
    user, password = admin_login(settings)
    try:
        return pymysql.connect(
            host=settings.db_host,
            port=settings.db_port,
            user=user,
            password=password,
            database=database,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=10,
        )
    except pymysql.err.MySQLError as exc:
        raise translate(
            exc, f"connecting to {settings.db_host}:{settings.db_port} as the admin login"
        ) from exc


def database_exists(cur: Any, name: str) -> bool:
    cur.execute("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = %s", (name,))
    return bool(cur.fetchone()[0])


def schema_revision(cur: Any, database: str) -> str | None:
    if upgrades.VERSION_TABLE not in tables_of(cur, database):
        return None
    cur.execute(f"SELECT version_num FROM {quote_identifier(database)}.{upgrades.VERSION_TABLE}")
    row = cur.fetchone()
    return None if row is None else str(row[0])


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tail(text: str, lines: int = 10) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# -- backup ---------------------------------------------------------------------------------


def backup(settings: BackupSettings, target: Path) -> Manifest:
    """Dump both databases into the new directory ``target`` (complete, or not there at all)."""
    target = target.absolute()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BackupError(f"{target} exists: a backup goes into a new (or empty) directory")
    if not target.parent.is_dir():
        raise BackupError(f"{target.parent} is not a directory")
    dump_tool = tool("mariadb-dump", "mysqldump")
    with contextlib.closing(admin_connection(settings)) as conn, conn.cursor() as cur:
        for name in (settings.db_name, settings.snakelab_db_name):
            if not database_exists(cur, name):
                where = f"{settings.db_host}:{settings.db_port}"
                raise BackupError(f"database {name} does not exist on {where}")
        revision = schema_revision(cur, settings.db_name)
    partial = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        began = time.monotonic()
        dump = partial / DUMP
        with option_file(settings) as options:
            done = subprocess.run(
                [
                    dump_tool,
                    f"--defaults-file={options}",
                    "--single-transaction",
                    "--quick",
                    "--no-create-db",
                    "--hex-blob",
                    "--no-tablespaces",
                    "--triggers",
                    "--max-allowed-packet=1G",
                    f"--result-file={dump}",
                    "--databases",
                    settings.db_name,
                    settings.snakelab_db_name,
                ],
                env=tool_environment(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
            )
        if done.returncode != 0:
            raise BackupError(
                f"{Path(dump_tool).name} failed ({done.returncode}): {tail(done.stderr)}"
            )
        seconds = time.monotonic() - began
        os.chmod(dump, 0o600)
        manifest = Manifest(
            ax3l_db=settings.db_name,
            snakelab_db=settings.snakelab_db_name,
            created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            ax3l_version=settings.ax3l_version,
            schema_revision=revision,
            dump_bytes=dump.stat().st_size,
            dump_sha256=sha256_of(dump),
            seconds=seconds,
        )
        manifest_path = partial / MANIFEST
        manifest_path.write_text(json.dumps(manifest.to_json(), indent=1) + "\n")
        for path in (dump, manifest_path):
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
        if target.exists():
            target.rmdir()  # empty, checked above
        os.rename(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return manifest


# -- restore --------------------------------------------------------------------------------


def orchestrator_answers(settings: Settings) -> str | None:
    """The orchestrator's status URL when something answers there, else None."""
    host = "127.0.0.1" if settings.http_host in ("0.0.0.0", "::", "") else settings.http_host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    url = f"http://{host}:{settings.orchestrator_port}/health"
    try:
        with urllib.request.urlopen(url, timeout=1):
            return url
    except urllib.error.HTTPError:
        return url  # it answered, with an error
    except (urllib.error.URLError, OSError, ValueError):
        return None


def running_stack(cur: Any, settings: Settings, databases: tuple[str, ...]) -> list[str]:
    """Why the stack looks to be running, or nothing: any session of another client whose
    current database is one of ``databases`` (every Ax3l service and the reference SnakeLab
    keep one open while they run, however they were started: ``make run``, systemd, compose),
    an answer on the orchestrator's status port (``AX3L_HTTP_HOST``,
    ``AX3L_ORCHESTRATOR_PORT``), or ``make run``'s supervisor holding its lock."""
    reasons = []
    cur.execute(
        "SELECT user, db, COUNT(*) FROM information_schema.processlist"
        f" WHERE id <> CONNECTION_ID() AND db IN ({placeholders(databases)})"
        " GROUP BY user, db ORDER BY db, user",
        databases,
    )
    for user, database, count in cur.fetchall():
        reasons.append(f"{count} connection(s) of {user} to database {database}")
    answering = orchestrator_answers(settings)
    if answering:
        reasons.append(f"the orchestrator answers at {answering}")
    supervisor = supervisor_running()
    if supervisor:
        reasons.append(supervisor)
    return reasons


def supervisor_running() -> str | None:
    """Whether ``make run``'s supervisor holds its lock (``<run dir>/stack/supervisor.lock``,
    ``AX3L_RUN_DIR`` or ``.run`` in the working directory): it restarts services that are
    backing off, which hold no connection yet."""
    lock = Path(os.environ.get("AX3L_RUN_DIR") or ".run") / "stack" / "supervisor.lock"
    try:
        handle = lock.open("rb")
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return f"make run's supervisor holds {lock.absolute()}"
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


# What every fresh database holds: its schema revision, not an experiment.
BOOKKEEPING = frozenset({"ax3l_meta", upgrades.VERSION_TABLE})


def rows_present(cur: Any, database: str) -> list[str]:
    """The tables of ``database`` but the bookkeeping ones that hold at least one row."""
    found = []
    for table in tables_of(cur, database, base_only=True):
        if table in BOOKKEEPING:
            continue
        cur.execute(f"SELECT 1 FROM {quote_identifier(database)}.{quote_identifier(table)} LIMIT 1")
        if cur.fetchone() is not None:
            found.append(table)
    return found


def tables_of(cur: Any, database: str, base_only: bool = False) -> list[str]:
    """The tables of ``database`` by name (``base_only``: not its views)."""
    cur.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
        + (" AND table_type = 'BASE TABLE'" if base_only else "")
        + " ORDER BY table_name",
        (database,),
    )
    return [str(row[0]) for row in cur.fetchall()]


def use_line(name: str) -> bytes:
    return f"USE {quote_identifier(name)};\n".encode()


def load(
    settings: BackupSettings, dump: Path, renames: dict[str, str], login: tuple[str, str]
) -> None:
    """Feed ``dump`` (``check_dump`` passed it) to the ``mariadb`` client in its sandbox mode,
    logged in as ``login``, each ``USE`` of a source database pointed at its staging database
    (``renames``); every source database must appear once."""
    client = tool("mariadb", "mysql")
    sandbox = sandbox_option(client)
    lines = {use_line(source): use_line(staging) for source, staging in renames.items()}
    seen: set[bytes] = set()
    with contextlib.ExitStack() as stack:
        options = stack.enter_context(option_file(settings, login))
        errors = stack.enter_context(tempfile.TemporaryFile())
        proc = subprocess.Popen(
            [
                client,
                f"--defaults-file={options}",
                sandbox,
                "--local-infile=0",
                "--batch",
                "--max-allowed-packet=1G",
            ],
            env=tool_environment(),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        assert proc.stdin is not None
        try:
            with dump.open("rb") as handle:
                for line in handle:
                    if line.startswith(b"USE `"):
                        if line not in lines or line in seen:
                            raise BackupError(f"{dump}: unexpected {line.decode().strip()!r}")
                        seen.add(line)
                        line = lines[line]
                    proc.stdin.write(line)
        except BrokenPipeError:
            pass  # the client stopped on an error: its message follows
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
        code = proc.wait()
        errors.seek(0)
        said = errors.read().decode(errors="replace")
    if code != 0:
        raise BackupError(f"loading {dump} failed ({code}): {tail(said)}")
    if seen != set(lines):
        raise BackupError(f"{dump} is incomplete: not every database of the manifest is in it")


def sandbox_option(client: str) -> str:
    """The client's option that turns its own commands off (``\\!``, ``system``, ``source``,
    ``tee``...): MariaDB's ``--sandbox`` or MySQL's ``--commands=OFF``; a client with neither is
    refused, since a dump could then run commands in the operator's shell."""
    for option in ("--sandbox", "--commands=OFF"):
        done = subprocess.run(
            [client, option, "--version"],
            env=tool_environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        if done.returncode == 0:
            return option
    raise BackupError(
        f"{client} has no sandbox mode (MariaDB 10.5.25, 10.6.18, 10.11.8 or later; MySQL"
        " 8.0.40 or later): without it a backup's client commands would run in this shell;"
        " install a newer mariadb-client"
    )


@contextlib.contextmanager
def staging_login(cur: Any, user: str, staging: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """A login of the restore's own, from the admin's host, that may do anything in the
    ``staging`` databases and nothing elsewhere (no grant, no user, no other database, no
    definer but itself), dropped afterwards: the login the dump is loaded with."""
    cur.execute("SELECT SUBSTRING_INDEX(USER(), '@', -1)")
    host = str(cur.fetchone()[0])
    password = secrets.token_urlsafe(24)
    account = f"{quote_string(user)}@{quote_string(host)}"
    cur.execute(f"CREATE USER {account} IDENTIFIED BY %s", (password,))
    try:
        for name in staging:
            cur.execute(f"GRANT ALL PRIVILEGES ON {quote_identifier(name)}.* TO {account}")
        yield user, password
    finally:
        cur.execute(f"DROP USER IF EXISTS {account}")


def quote_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


# What a dump of tables and rows holds, as ``mariadb-dump`` writes it: every statement (its
# strings '', its names `N`, its comments gone, upper case, whitespace one space) is one of these.
_ALLOWED_STATEMENTS = re.compile(
    r"SET (?!.*\b(?:GLOBAL|PASSWORD|ROLE|STATEMENT)\b).*"
    r"|DROP TABLE IF EXISTS `N`"
    r"|CREATE TABLE `N` ?\(.*"
    r"|LOCK TABLES `N` WRITE|UNLOCK TABLES"
    r"|ALTER TABLE `N` (?:DISABLE|ENABLE) KEYS"
    r"|INSERT INTO `N`(?: ?\([^()]*\))? ?VALUES ?\(.*"
    r"|USE `N`",
    re.DOTALL,
)
# Refused in any statement whatever it is (a table's options included).
_REFUSED_WORDS = re.compile(
    r"\b(?:DEFINER|GRANT|USER|TRIGGER|VIEW|PROCEDURE|FUNCTION|EVENT|DIRECTORY|CONNECTION)\b"
    r"|\bENGINE ?= ?(?!INNODB\b|ARIA\b|MYISAM\b)"
)
# The line a MariaDB 10.11.8+ mariadb-dump opens with (it asks the client for its sandbox).
SANDBOX_LINE = b"/*M!999999\\- enable the sandbox mode */"
# Outside strings and comments: a token; inside one (a key of _CLOSE), the rest of it.
_TOKEN = re.compile(rb"/\*M?!\d*|/\*|\*/|--(?=\s|$)|\#|['\"`;\\]|[^'\"`;\\/*#-]+|.", re.DOTALL)
_CLOSE = {
    b"'": re.compile(rb"(?:[^'\\]|\\.|'')*(')?", re.DOTALL),
    b'"': re.compile(rb'(?:[^"\\]|\\.|"")*(")?', re.DOTALL),
    b"`": re.compile(rb"(?:[^`]|``)*(`)?", re.DOTALL),
    b"/*": re.compile(rb"(?:(?!\*/).)*(\*/)?", re.DOTALL),
}


def check_dump(dump: Path, uses: set[bytes]) -> None:
    """Refuse ``dump`` (``BackupError``, nothing loaded yet) unless each of its statements is one
    ``_ALLOWED_STATEMENTS`` names with none of ``_REFUSED_WORDS``, its ``USE`` lines are the
    ``uses``, and it has no client command: no backslash outside a string, and no command word
    (``system``, ``source``, ``delimiter``...), which no allowed statement begins with.
    Strings may hold anything: they are the rows' data."""
    scan = _DumpScan(dump, uses)
    with dump.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            if number > 1 or line.rstrip() != SANDBOX_LINE:
                scan.line(number, line)
    scan.statement(b"")


@dataclass
class _DumpScan:
    """``check_dump``'s reading: the statement so far (strings '', names `N`, no comments) and
    the string, name or comment a line ended in."""

    dump: Path
    uses: set[bytes]
    code: list[bytes] = field(default_factory=list)
    inside: bytes | None = None
    number: int = 0

    def line(self, number: int, line: bytes) -> None:
        self.number, at = number, 0
        while at < len(line):
            if self.inside is not None:
                rest = _CLOSE[self.inside].match(line, at)
                assert rest is not None  # each pattern matches the empty string
                if self.inside == b"/*" and b"\\" in rest.group():
                    self.refuse("a backslash in a comment (a client command)")
                at = rest.end()
                if rest.group(1) is not None:
                    self.inside = None
                continue
            token = _TOKEN.match(line, at)
            assert token is not None  # "." matches any byte
            text, at = token.group(), token.end()
            if text in _CLOSE:
                self.inside = text
                self.code.append({b"`": b" `N` ", b"/*": b" "}.get(text, b" '' "))
            elif text in (b"--", b"#"):
                if b"\\" in line[at:]:
                    self.refuse("a backslash in a comment (a client command)")
                at = len(line)
            elif text == b"\\":
                self.refuse("a client command (a backslash outside a string)")
            elif text == b";":
                self.statement(line)
            elif text.startswith(b"/*") or text == b"*/":
                self.code.append(b" ")  # a versioned comment's text is the server's to run
            else:
                self.code.append(text)

    def statement(self, line: bytes) -> None:
        """Check the statement that ends on ``line`` (at the end of the dump: b"")."""
        code, self.code = b"".join(self.code), []
        _check_statement(self.dump, self.number, code, line, self.uses)

    def refuse(self, what: str) -> None:
        _refuse(self.dump, self.number, what)


def _check_statement(dump: Path, number: int, code: bytes, line: bytes, uses: set[bytes]) -> None:
    statement = " ".join(code.decode("utf-8", "replace").upper().split())
    if not statement:
        return
    if statement.startswith("USE") and line.strip() + b"\n" not in uses:
        _refuse(dump, number, "a USE of a database the manifest does not name")
    refused = _REFUSED_WORDS.search(statement)
    if refused is not None:
        _refuse(dump, number, f"{refused.group().strip()} in {statement[:60]!r}")
    if not _ALLOWED_STATEMENTS.fullmatch(statement):
        _refuse(dump, number, f"a statement not of a table or its rows: {statement[:60]!r}")


def _refuse(dump: Path, number: int, what: str) -> None:
    raise BackupError(
        f"{dump}, line {number}: {what}: the backup is refused, nothing was loaded. A dump of"
        " Ax3l's holds tables and rows only: restore only backups you made"
    )


@dataclass(frozen=True)
class Restored:
    manifest: Manifest
    events: int
    runs: int
    replaced: bool
    seconds: float
    revision: str | None
    created: tuple[str, ...]  # target databases that did not exist (no grants on them yet)


def restore(settings: BackupSettings, source: Path, replace: bool = False) -> Restored:
    """Bring the backup in ``source`` into the configured databases; see the module."""
    manifest = Manifest.read(source)
    dump = source / DUMP
    if not dump.is_file() or dump.stat().st_size != manifest.dump_bytes:
        raise BackupError(f"{dump} is missing or not the size its manifest says: a damaged backup")
    if sha256_of(dump) != manifest.dump_sha256:
        raise BackupError(f"{dump} does not match its manifest's SHA-256: a damaged backup")
    check_dump(dump, {use_line(manifest.ax3l_db), use_line(manifest.snakelab_db)})
    targets = (settings.db_name, settings.snakelab_db_name)
    if targets[0] == targets[1]:
        raise BackupError("AX3L_DB_NAME and AX3L_SNAKELAB_DB_NAME must name two databases")
    began = time.monotonic()
    token = secrets.token_hex(4)
    staging = (f"{STAGING_PREFIX}{token}_ax3l", f"{STAGING_PREFIX}{token}_snakelab")
    trash = f"{STAGING_PREFIX}{token}_old"
    try:
        with contextlib.closing(admin_connection(settings)) as conn, conn.cursor() as cur:
            refuse_running(cur, settings, targets)
            occupied = {name: rows_present(cur, name) for name in targets}
            occupied = {name: tables for name, tables in occupied.items() if tables}
            if occupied and not replace:
                held = "; ".join(
                    f"{name}: {', '.join(tables)}" for name, tables in occupied.items()
                )
                raise BackupError(
                    f"the databases hold an experiment ({held}); restoring replaces it: run again"
                    " with --replace (back it up first), or point AX3L_DB_NAME and"
                    " AX3L_SNAKELAB_DB_NAME at empty databases"
                )
            created = [name for name in targets if not database_exists(cur, name)]
            for name in (*created, *staging, trash):
                cur.execute(
                    f"CREATE DATABASE {quote_identifier(name)}"
                    " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
                )
            try:
                with staging_login(cur, f"{STAGING_PREFIX}{token}", staging) as login:
                    renames = {manifest.ax3l_db: staging[0], manifest.snakelab_db: staging[1]}
                    load(settings, dump, renames, login)
                refuse_running(cur, settings, targets)  # started while loading
                moves = [
                    f"{quote_identifier(name)}.{quote_identifier(table)} TO"
                    f" {quote_identifier(trash)}.{quote_identifier(f'{index}_{table}')}"
                    for index, name in enumerate(targets)
                    for table in tables_of(cur, name)
                ]
                moves += [
                    f"{quote_identifier(stage)}.{quote_identifier(table)} TO"
                    f" {quote_identifier(name)}.{quote_identifier(table)}"
                    for stage, name in zip(staging, targets, strict=True)
                    for table in tables_of(cur, stage)
                ]
                cur.execute("RENAME TABLE " + ", ".join(moves))
            finally:
                for name in (*staging, trash):
                    cur.execute(f"DROP DATABASE IF EXISTS {quote_identifier(name)}")
            events = count(cur, targets[0], "events")
            runs = count(cur, targets[1], tables.SIMULATION_RUNS.name)
            revision = schema_revision(cur, targets[0])
    except pymysql.err.MySQLError as exc:
        raise translate(exc, "restoring the backup") from exc
    seconds = time.monotonic() - began
    return Restored(manifest, events, runs, bool(occupied), seconds, revision, tuple(created))


def refuse_running(cur: Any, settings: Settings, targets: tuple[str, ...]) -> None:
    reasons = running_stack(cur, settings, targets)
    if reasons:
        raise BackupError(
            "the stack is running (" + "; ".join(reasons) + "): stop it first (`make stop`,"
            " `systemctl stop ax3l`, or `docker compose stop orchestrator toolbroker reports"
            " snakelab`), then restore"
        )


def count(cur: Any, database: str, table: str) -> int:
    if table not in tables_of(cur, database):
        return 0
    cur.execute(f"SELECT COUNT(*) FROM {quote_identifier(database)}.{quote_identifier(table)}")
    return int(cur.fetchone()[0])


# -- the commands ---------------------------------------------------------------------------


def backup_command(target: Path) -> int:
    try:
        settings = BackupSettings()
        manifest = backup(settings, target)
    except DatabaseError as exc:
        print(f"ax3l-db: backup: {exc}", file=sys.stderr)
        return 1
    print(
        f"Backed up databases {manifest.ax3l_db} and {manifest.snakelab_db} (schema revision"
        f" {manifest.schema_revision or 'none'}) to {target}: {manifest.dump_bytes:,} bytes in"
        f" {manifest.seconds:.1f} s."
    )
    return 0


def restore_command(source: Path, replace: bool) -> int:
    try:
        settings = BackupSettings()
        done = restore(settings, source, replace)
    except DatabaseError as exc:
        print(f"ax3l-db: restore: {exc}", file=sys.stderr)
        return 1
    print(
        f"Restored the backup of {done.manifest.created_at} ({done.manifest.ax3l_db},"
        f" {done.manifest.snakelab_db}) into {settings.db_name} and {settings.snakelab_db_name}:"
        f" {done.events:,} events, {done.runs:,} SnakeLab runs, in {done.seconds:.1f} s"
        + ("; the experiment that was there is replaced." if done.replaced else ".")
    )
    for name in done.created:
        print(
            f"Database {name} was created: grant the services' logins on it (as"
            " deploy/mysql-init does; `ax3l-db grant-reports` for the report server's)."
        )
    if done.revision is not None and done.revision != upgrades.head():
        print(
            f"Its schema revision is {done.revision}, this Ax3l's {upgrades.head()}: run"
            " `ax3l-db upgrade` before starting the stack."
        )
    return 0
