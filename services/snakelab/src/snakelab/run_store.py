"""SnakeLab's tables: every write the reference server makes to the ``snakelab`` database.

Each thread gets its own connection (pymysql connections are not thread-safe): the control
thread writes submissions and the state changes requested over the socket, the worker thread
writes progress and terminal states. State changes requested over the socket are conditional
(``WHERE status IN ...``) so they can never overwrite a terminal state the worker wrote first.

Every write is one transaction sent in one round trip, so a write that failed on a dead
connection can be sent again whole on a fresh one (``db_outages.py`` says which failures are
retried and for how long). Retrying is safe: the updates are idempotent, and every insert has
a unique key, so when a retry collides with its own rows (``1062``) the earlier attempt was
committed before its connection died, and the write is done.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pymysql
from pymysql.constants import CLIENT

from ax3l.shared.db.errors import translate
from ax3l.shared.db.tables import SNAKELAB_TABLES, ddl
from snakelab.db_outages import (
    CONTROL_PATIENCE_SECONDS,
    DUPLICATE_KEY,
    SHUTDOWN_PATIENCE_SECONDS,
    Backoff,
    DatabaseLoginRefused,
    OutageLog,
    error_code,
    is_transient,
    login_refused,
)

log = logging.getLogger(__name__)

STOPPED_MESSAGE = "Server stopped before run completed"
UNCONFIRMED_MESSAGE = "Submission refused: the database went away while storing it"
_INSERT_RUN = "INSERT INTO simulation_runs (run_id,"
NON_TERMINAL = ("queued", "running", "paused", "cancelling")
# A connection idle longer than this is pinged first: MySQL may have dropped it (wait_timeout).
IDLE_PING_SECONDS = 60.0
# Rows per INSERT statement: well below max_allowed_packet even for the longest runs.
EPISODE_CHUNK = 5000

_RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# (episode, score, steps, epsilon, loss): one simulation_episodes row without its run_id.
EpisodeRow = tuple[int, int, int, float | None, float | None]


@dataclass(frozen=True)
class EpisodeSql:
    """Episode rows already turned into SQL.

    Built by the thread that holds the rows (the worker), so the writer thread only sends:
    while the database stores one run, the text of the next one is being made.
    """

    statements: tuple[str, ...]

    @classmethod
    def build(cls, run_id: str, rows: Sequence[EpisodeRow]) -> EpisodeSql:
        return cls(tuple(RunStore._episode_inserts(run_id, rows)))


def utc_now() -> datetime:
    """Now, as the naive UTC timestamp stored in DATETIME(6) columns."""
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class DbSettings:
    """Where SnakeLab's own database is, from ``SNAKELAB_DB_*`` (its own user, not Ax3l's)."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "snakelab"
    password: str = ""
    database: str = "snakelab"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DbSettings:
        port_text = env.get("SNAKELAB_DB_PORT", "3306")
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"SNAKELAB_DB_PORT must be a port number, got {port_text!r}") from None
        return cls(
            host=env.get("SNAKELAB_DB_HOST", cls.host),
            port=port,
            user=env.get("SNAKELAB_DB_USER", cls.user),
            password=_password(env),
            database=env.get("SNAKELAB_DB_NAME", cls.database),
        )

    def describe(self) -> str:
        """Where, without the password (for logs)."""
        return f"{self.user}@{self.host}:{self.port}/{self.database}"


def _password(env: Mapping[str, str]) -> str:
    """SNAKELAB_DB_PASSWORD, else the contents of the file SNAKELAB_DB_PASSWORD_FILE names
    (a compose secret), without its trailing newline."""
    if "SNAKELAB_DB_PASSWORD" in env or not env.get("SNAKELAB_DB_PASSWORD_FILE"):
        return env.get("SNAKELAB_DB_PASSWORD", DbSettings.password)
    path = env["SNAKELAB_DB_PASSWORD_FILE"]
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"SNAKELAB_DB_PASSWORD_FILE={path}: cannot read it ({exc})") from None


def finite_or_none(value: float | None) -> float | None:
    """``value`` if it is a finite number, else None (JSON and SQL have no NaN)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _sql_number(value: float | int | None) -> str:
    # repr of a finite float is a valid SQL literal ("0.96", "1e-05").
    finite = finite_or_none(value)
    return "NULL" if finite is None else repr(finite)


class _Connection:
    def __init__(self, raw: pymysql.connections.Connection):
        self.raw = raw
        self.last_used = time.monotonic()


class RunStore:
    """Writes of ``simulation_runs``, ``configurations`` and ``simulation_episodes``."""

    def __init__(self, settings: DbSettings, project_version: str, host_id: str = ""):
        self.settings = settings
        self.project_version = project_version
        # This server's name in simulation_runs.host (SNAKELAB_HOST_ID).
        self.host_id = host_id
        self._local = threading.local()
        self._all: list[_Connection] = []
        self._all_lock = threading.Lock()
        self.outages = OutageLog()
        # Set when the database refused the login or a privilege: the server stops for it.
        self.refused: DatabaseLoginRefused | None = None
        # Set once the server stops: retries end at this moment (monotonic), sleepers wake.
        self._give_up_at: float | None = None
        self._stopping = threading.Event()
        # Runs whose insert may have been committed although the submit was refused (the
        # connection died at the commit and the database stayed away): failed once it is back.
        self._unconfirmed: set[str] = set()
        self._unconfirmed_lock = threading.Lock()

    # -- connections ------------------------------------------------------------------------

    def _connect(self) -> _Connection:
        s = self.settings
        raw = pymysql.connect(
            host=s.host,
            port=s.port,
            user=s.user,
            password=s.password,
            database=s.database,
            charset="utf8mb4",
            autocommit=False,
            connect_timeout=5,
            read_timeout=60,
            write_timeout=60,
            # Every row this server writes refers to a run it inserted itself and never
            # deletes, so the per-row foreign key lookups (a third of an episode batch's
            # cost) only repeat what is true by construction.
            init_command="SET SESSION foreign_key_checks = 0",
            client_flag=CLIENT.MULTI_STATEMENTS,
        )
        connection = _Connection(raw)
        with self._all_lock:
            self._all.append(connection)
        return connection

    def _connection(self) -> pymysql.connections.Connection:
        connection: _Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
            self._local.connection = connection
        elif time.monotonic() - connection.last_used > IDLE_PING_SECONDS:
            connection.raw.ping(reconnect=True)
        connection.last_used = time.monotonic()
        return connection.raw

    def _discard(self) -> None:
        connection: _Connection | None = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            with self._all_lock:
                if connection in self._all:
                    self._all.remove(connection)
            with contextlib.suppress(pymysql.err.MySQLError, OSError):
                connection.raw.close()

    def stop_waiting(self, after: float = SHUTDOWN_PATIENCE_SECONDS) -> None:
        """The server stops: writes still failing ``after`` seconds from now are given up."""
        self._give_up_at = time.monotonic() + after
        self._stopping.set()

    def close(self) -> None:
        """Close every connection any thread opened (call once the threads are done)."""
        self.stop_waiting(0.0)
        with self._all_lock:
            connections, self._all = self._all, []
        for connection in connections:
            with contextlib.suppress(pymysql.err.MySQLError, OSError):
                connection.raw.close()

    # -- startup ----------------------------------------------------------------------------

    def wait_until_reachable(self, seconds: float) -> None:
        """Connect, retrying for ``seconds`` (the database may start after this server).

        A refused login or a missing database is raised at once: waiting will not fix it.
        """
        self._script("connecting", "SELECT 1", patience=seconds)

    def create_tables(self) -> None:
        """SnakeLab's three tables, created when missing."""
        self._script("creating SnakeLab's tables", *(ddl(table) for table in SNAKELAB_TABLES))

    def add_host_column(self) -> None:
        """``simulation_runs.host``, added to a table created by an older reference SnakeLab."""
        (missing,) = self._script(
            "looking for simulation_runs.host",
            (
                "SELECT 1 FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
                " AND TABLE_NAME = 'simulation_runs' AND COLUMN_NAME = 'host'",
                (),
            ),
        )
        if not missing:
            self._script(
                "adding simulation_runs.host",
                "ALTER TABLE simulation_runs ADD COLUMN host VARCHAR(255) NULL",
            )

    def fail_unfinished(self, message: str = STOPPED_MESSAGE) -> int:
        """Mark non-terminal rows failed: their runs died with an earlier process. With a host
        id, only this host's rows and rows no host claims; another host's running and queued
        runs in a shared database are left alone. Without one, every such row (the only host).
        """
        placeholders = ", ".join(["%s"] * len(NON_TERMINAL))
        where = f"status IN ({placeholders})"
        args: tuple[Any, ...] = (message, utc_now(), *NON_TERMINAL)
        if self.host_id:
            where += " AND (host = %s OR host IS NULL)"
            args = (*args, self.host_id)
        (changed,) = self._script(
            "failing runs of an earlier server process",
            (
                "UPDATE simulation_runs SET status = 'failed', error_message = %s,"
                f" completed_at = %s WHERE {where}",
                args,
            ),
        )
        return changed

    # -- runs -------------------------------------------------------------------------------

    def insert_run(
        self,
        run_id: str,
        config_hash: str,
        flat_config: Mapping[str, int | float],
        created_at: datetime,
    ) -> None:
        """The run's row and its 26 configuration columns, in one transaction."""
        columns = ", ".join(flat_config)
        placeholders = ", ".join(["%s"] * len(flat_config))
        self._script(
            f"storing run {run_id}",
            (
                "INSERT INTO simulation_runs (run_id, project_version, config_hash, status,"
                " created_at, host) VALUES (%s, %s, %s, 'queued', %s, %s)",
                (run_id, self.project_version, config_hash, created_at, self.host_id or None),
            ),
            (
                f"INSERT INTO configurations (run_id, {columns}) VALUES (%s, {placeholders})",
                (run_id, *flat_config.values()),
            ),
        )

    def change_state(self, run_id: str, state: str, from_states: Sequence[str]) -> bool:
        """Set ``status`` only if it is one of ``from_states``; True when a row changed."""
        placeholders = ", ".join(["%s"] * len(from_states))
        (changed,) = self._script(
            f"setting run {run_id} {state}",
            (
                "UPDATE simulation_runs SET status = %s"
                f" WHERE run_id = %s AND status IN ({placeholders})",
                (state, run_id, *from_states),
            ),
        )
        return bool(changed)

    def cancel_queued(self, run_id: str, completed_at: datetime) -> bool:
        """A queued run that never started becomes ``cancelled``."""
        (changed,) = self._script(
            f"cancelling queued run {run_id}",
            (
                "UPDATE simulation_runs SET status = 'cancelled', completed_at = %s"
                " WHERE run_id = %s AND status = 'queued'",
                (completed_at, run_id),
            ),
        )
        return bool(changed)

    def mark_running(self, run_id: str, started_at: datetime) -> None:
        """The worker took the run; a pause or cancel that got in first keeps its status."""
        self._script(
            f"starting run {run_id}", self._start_statement(run_id, started_at), patience=None
        )

    @staticmethod
    def _start_statement(run_id: str, started_at: datetime) -> tuple[str, Sequence[Any]]:
        return (
            "UPDATE simulation_runs SET status = IF(status = 'queued', 'running', status),"
            " started_at = %s, episode_count = 0 WHERE run_id = %s",
            (started_at, run_id),
        )

    def write_progress(
        self,
        run_id: str,
        rows: Sequence[EpisodeRow] | EpisodeSql,
        episode_count: int,
        high_score: int | None,
        started_at: datetime | None = None,
    ) -> None:
        """New episodes and the run's counters, in one transaction (with its start, if given)."""
        start = [] if started_at is None else [self._start_statement(run_id, started_at)]
        self._script(
            f"recording episodes of run {run_id}",
            *start,
            *self._episodes(run_id, rows),
            (
                "UPDATE simulation_runs SET episode_count = %s, high_score = %s WHERE run_id = %s",
                (episode_count, high_score, run_id),
            ),
            patience=None,
        )

    def finish(
        self,
        run_id: str,
        state: str,
        rows: Sequence[EpisodeRow] | EpisodeSql,
        episode_count: int,
        high_score: int | None,
        completed_at: datetime,
        error: str | None = None,
        snapshot: dict[str, Any] | None = None,
        started_at: datetime | None = None,
    ) -> None:
        """The last episodes and the terminal state in one transaction (with its start if given)."""
        snapshot_json = None if snapshot is None else json.dumps(snapshot, allow_nan=False)
        start = [] if started_at is None else [self._start_statement(run_id, started_at)]
        self._script(
            f"finishing run {run_id} as {state}",
            *start,
            *self._episodes(run_id, rows),
            (
                "UPDATE simulation_runs SET status = %s, episode_count = %s, high_score = %s,"
                " completed_at = %s, error_message = %s, high_score_snapshot = %s"
                " WHERE run_id = %s",
                (state, episode_count, high_score, completed_at, error, snapshot_json, run_id),
            ),
            patience=None,
        )

    def fail_runs(self, run_ids: Sequence[str], message: str) -> None:
        """Runs that will never run (the server is stopping) become ``failed``."""
        if not run_ids:
            return
        placeholders = ", ".join(["%s"] * len(run_ids))
        self._script(
            "failing queued runs at shutdown",
            (
                "UPDATE simulation_runs SET status = 'failed', error_message = %s,"
                f" completed_at = %s WHERE run_id IN ({placeholders})",
                (message, utc_now(), *run_ids),
            ),
        )

    def _script(
        self,
        doing: str,
        *statements: str | tuple[str, Sequence[Any]],
        patience: float | None = CONTROL_PATIENCE_SECONDS,
    ) -> list[int]:
        """The statements and COMMIT as one transaction in one round trip; their row counts.

        One round trip instead of one per statement plus the commit: under a busy trainer
        thread every round trip also waits for the GIL, and episode writes are frequent.
        Parameters are escaped by the driver (``mogrify``) before the statements are joined.

        A failure that a fresh connection may fix is retried with backoff for ``patience``
        seconds (None: until the server stops). A refused login or privilege is raised as
        ``DatabaseLoginRefused`` (and kept in ``refused``) without waiting.
        """
        deadline = None if patience is None else time.monotonic() + patience
        backoff = Backoff()
        retried = False
        while True:
            unconfirmed = self._take_unconfirmed()
            try:
                counts = self._send(statements, unconfirmed)
            except (pymysql.err.MySQLError, OSError) as exc:
                # A statement that failed leaves its transaction open: closing the connection
                # rolls it back.
                self._discard()
                self._return_unconfirmed(unconfirmed)
                if retried and error_code(exc) == DUPLICATE_KEY:
                    # Our own rows: the attempt whose connection died was committed.
                    self.outages.recovered()
                    return [0] * len(statements)
                refused = login_refused(exc, doing)
                if refused is not None:
                    self.refused = refused
                    raise refused from exc
                if not is_transient(exc) or not self._wait(backoff.next(), deadline):
                    if retried and (run_id := _inserted_run(statements)) is not None:
                        # Its commit may have landed: fail the row once the database is back.
                        self._return_unconfirmed([run_id])
                    raise translate(exc, doing) from exc
                self.outages.failed(doing, exc)
                retried = True
            else:
                self.outages.recovered()
                return counts

    def _send(
        self, statements: Sequence[str | tuple[str, Sequence[Any]]], unconfirmed: Sequence[str]
    ) -> list[int]:
        conn = self._connection()
        with conn.cursor() as cur:
            texts = [
                text if isinstance(text, str) else cur.mogrify(text[0], text[1])
                for text in statements
            ]
            if unconfirmed:
                texts.append(
                    cur.mogrify(
                        "UPDATE simulation_runs SET status = 'failed', error_message = %s,"
                        " completed_at = %s WHERE status = 'queued' AND run_id IN %s",
                        (UNCONFIRMED_MESSAGE, utc_now(), tuple(unconfirmed)),
                    )
                )
            cur.execute(";".join([*texts, "COMMIT"]))
            counts = [cur.rowcount]
            while cur.nextset():
                counts.append(cur.rowcount)
        if unconfirmed:
            log.warning(
                "marked %d run(s) whose submit was refused during an outage as failed",
                len(unconfirmed),
            )
        return counts[: len(statements)]

    def _wait(self, seconds: float, deadline: float | None) -> bool:
        """Sleep ``seconds`` before a retry; False when the retry would come too late."""
        now = time.monotonic()
        ends = [t for t in (deadline, self._give_up_at) if t is not None]
        if ends and now + seconds > min(ends):
            return False
        self._stopping.wait(seconds)
        return self._give_up_at is None or time.monotonic() < self._give_up_at

    def _take_unconfirmed(self) -> list[str]:
        if not self._unconfirmed:  # the common case, read without the lock
            return []
        with self._unconfirmed_lock:
            taken = sorted(self._unconfirmed)
            self._unconfirmed.clear()
            return taken

    def _return_unconfirmed(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            with self._unconfirmed_lock:
                self._unconfirmed.update(run_ids)

    @staticmethod
    def _episodes(run_id: str, rows: Sequence[EpisodeRow] | EpisodeSql) -> Sequence[str]:
        if isinstance(rows, EpisodeSql):
            return rows.statements
        return RunStore._episode_inserts(run_id, rows)

    @staticmethod
    def _episode_inserts(run_id: str, rows: Sequence[EpisodeRow]) -> list[str]:
        """The statements storing ``rows``, built by hand rather than with executemany.

        Every value is a number this server made (the run id is its own uuid4), and one
        literal statement is far cheaper than escaping six values per row. The run id is set
        once in a session variable: MariaDB reads ``@run_id`` faster than it parses the same
        string literal again on every row.
        """
        if not _RUN_ID.fullmatch(run_id):
            raise ValueError(f"not a run id made by this server: {run_id!r}")
        if not rows:
            return []
        statements = [f"SET @run_id = '{run_id}'"]
        for start in range(0, len(rows), EPISODE_CHUNK):
            chunk = rows[start : start + EPISODE_CHUNK]
            values = _values_fast(chunk)
            if values is None:
                values = ",".join(
                    f"(@run_id,{int(episode)},{int(score)},{int(steps)},"
                    f"{_sql_number(epsilon)},{_sql_number(loss)})"
                    for episode, score, steps, epsilon, loss in chunk
                )
            statements.append(
                "INSERT INTO simulation_episodes (run_id, episode, score, steps, epsilon, loss)"
                f" VALUES {values}"
            )
        return statements


def _inserted_run(statements: Sequence[str | tuple[str, Sequence[Any]]]) -> str | None:
    """The run id when ``statements`` are ``insert_run``'s, else None."""
    first = statements[0] if statements else None
    if isinstance(first, tuple) and first[0].startswith(_INSERT_RUN):
        return str(first[1][0])
    return None


def _values_fast(rows: Sequence[EpisodeRow]) -> str | None:
    """The VALUES list of ``rows`` through the C JSON encoder, or None when it cannot be used.

    ``[[1,3,40,0.95,null],...]`` becomes ``(@run_id,1,3,40,0.95,NULL),...``: JSON numbers
    are valid SQL literals (floats in the same shortest form as ``repr``). Anything but plain
    numbers and None (a NaN, a numpy integer, a string) takes the careful path instead.
    """
    try:
        body = json.dumps(rows, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    if '"' in body or "t" in body or "f" in body:  # a string, true or false: not a number
        return None
    return body[1:-1].replace("[", "(@run_id,").replace("]", ")").replace("null", "NULL")
