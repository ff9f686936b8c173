"""Riding out database outages: which driver errors a wait fixes, the backoff, the outage log.

A write that fails because the connection died (a MariaDB restart, ``KILL``, a network cut)
or because the server is briefly unable to serve (too many connections, a lock timeout) is
retried on a fresh connection with backoff: the worker's writes until they land, requests on
the control socket for at most ``CONTROL_PATIENCE_SECONDS`` (the client gives up after 3 s).
Errors no wait can fix (bad login, missing database or privilege) are never retried: they
stop the server with a message that says what to do. Everything else (e.g. a table that is
gone) fails the one write, as before.
"""

from __future__ import annotations

import logging
import threading
import time

import pymysql

from ax3l.shared.db.errors import DatabaseError

log = logging.getLogger("snakelab.database")

# Errors that a new connection or a moment's wait fixes.
TRANSIENT_CODES = frozenset(
    {
        1040,  # too many connections
        1053,  # server shutdown in progress
        1205,  # lock wait timeout (the transaction was rolled back)
        1213,  # deadlock (rolled back)
        1927,  # connection was killed
        2002,  # can't connect through the socket
        2003,  # can't connect
        2006,  # server has gone away
        2013,  # lost connection during query
        2014,  # commands out of sync (a connection broken mid-result)
        2055,  # lost connection at handshake
    }
)
# Errors no wait fixes, and what to do about each.
FATAL_CODES = {
    1044: "grant SnakeLab's user all privileges on its database",
    1045: "check SNAKELAB_DB_USER and SNAKELAB_DB_PASSWORD",
    1049: "create the database named by SNAKELAB_DB_NAME",
    1142: "grant SnakeLab's user all privileges on its database",
    1143: "grant SnakeLab's user all privileges on its database",
    1227: "grant SnakeLab's user all privileges on its database",
}
DUPLICATE_KEY = 1062

# A request on the control socket waits this long for the database, then gets its error.
CONTROL_PATIENCE_SECONDS = 2.0
# Once the server is stopping, writes still failing after this long are given up.
SHUTDOWN_PATIENCE_SECONDS = 5.0
BACKOFF_FIRST_SECONDS = 0.05
BACKOFF_MAX_SECONDS = 1.0


class DatabaseLoginRefused(DatabaseError):
    """The database refuses this login or its privileges: waiting will not help."""


def error_code(exc: BaseException) -> int | None:
    """The driver's error number, if any."""
    code = exc.args[0] if exc.args else None
    return code if isinstance(code, int) else None


def is_transient(exc: BaseException) -> bool:
    """True when a fresh connection or a wait may make the failed write succeed."""
    if isinstance(exc, (ConnectionError, OSError)):
        return True
    if isinstance(exc, pymysql.err.InterfaceError):  # a connection already closed
        return True
    return error_code(exc) in TRANSIENT_CODES


def login_refused(exc: BaseException, doing: str) -> DatabaseLoginRefused | None:
    """The error to stop the server with when ``exc`` is one no wait can fix, else None."""
    code = error_code(exc)
    advice = FATAL_CODES.get(code) if code is not None else None
    if advice is None or not isinstance(exc, pymysql.err.MySQLError):
        return None
    detail = exc.args[1] if len(exc.args) > 1 else str(exc)
    return DatabaseLoginRefused(f"{doing}: {detail} ({code}); {advice}")


class Backoff:
    """Doubling waits from ``BACKOFF_FIRST_SECONDS`` up to ``BACKOFF_MAX_SECONDS``."""

    def __init__(self) -> None:
        self.delay = BACKOFF_FIRST_SECONDS

    def next(self) -> float:
        delay = self.delay
        self.delay = min(BACKOFF_MAX_SECONDS, delay * 2)
        return delay


class OutageLog:
    """Logs an outage once when it starts and once when it ends (not at every retry)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.since: float | None = None
        self.outages = 0

    def failed(self, doing: str, exc: BaseException) -> None:
        with self._lock:
            if self.since is not None:
                log.debug("%s: still unavailable (%s)", doing, exc)
                return
            self.since = time.monotonic()
            self.outages += 1
        log.warning("database unavailable while %s (%s); retrying with backoff", doing, exc)

    def recovered(self) -> None:
        if self.since is None:  # the common case, read without the lock
            return
        with self._lock:
            since, self.since = self.since, None
        if since is not None:
            log.warning("database back after %.2f s", time.monotonic() - since)
