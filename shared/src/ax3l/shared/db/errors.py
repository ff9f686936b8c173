"""Domain errors for database access: callers never see driver exceptions.

Three kinds matter to a long-running service: the server is away (``DatabaseUnavailable``:
wait and retry), a statement or a pool acquire ran out of time (``DatabaseTimeout``: fail the
step, not the service), and the setup is wrong (``DatabaseMisconfigured``: no wait can fix it,
the message says what to do). A full disk on the database server (``DiskFull``) is a kind of
unavailable: the server answers, but writes fail until someone frees space.
"""

from __future__ import annotations

import re

import pymysql


class DatabaseError(RuntimeError):
    """A database operation failed; the message says which and why."""


class DatabaseUnavailable(DatabaseError):
    """The server could not be reached or dropped the connection: waiting can fix this."""


class DatabaseTimeout(DatabaseUnavailable):
    """A statement or a pool acquire did not finish within its timeout."""


class DiskFull(DatabaseUnavailable):
    """The database server's disk is full: its writes fail (the transaction rolled back) until
    space is freed; waiting, and trying again, fixes this."""


class DatabaseMisconfigured(DatabaseError):
    """No wait can fix this (credentials, privileges, database, schema); the user must act."""


class SchemaMismatch(DatabaseMisconfigured):
    """The tables in the database are not the ones this version of Ax3l expects."""


# The server is away, restarting, or dropped this connection.
_CONNECTION_CODES = {
    1040,  # too many connections
    1053,  # server shutdown in progress
    1152,  # aborted connection
    1158,  # network read error
    1159,  # network read timeout
    1160,  # network write error
    1161,  # network write timeout
    1927,  # connection was killed
    2002,  # cannot connect through the socket
    2003,  # cannot connect
    2005,  # unknown host
    2006,  # server has gone away
    2013,  # lost connection during query
    2026,  # TLS error
    2055,  # lost connection (system error)
    4031,  # disconnected by the server for inactivity
}
# The server answered but gave up on the statement.
_TIMEOUT_CODES = {
    1205,  # lock wait timeout (row locks, and metadata locks through lock_wait_timeout)
    1969,  # MariaDB: max_statement_time exceeded
    3024,  # MySQL: max_execution_time exceeded
}
# The server's disk is full (InnoDB: "The table '...' is full" when a tablespace cannot grow).
_DISK_FULL_CODES = {
    1021,  # ER_DISK_FULL
    1114,  # ER_RECORD_FILE_FULL: the table is full
}
# Errors that carry the operating system's errno: disk full when that is ENOSPC (28).
_ERRNO_CODES = {
    3,  # EE_WRITE: error writing file (Errcode: 28)
    1026,  # ER_ERROR_ON_WRITE
    1030,  # ER_GET_ERRNO: got error 28 from storage engine
}
_ENOSPC = re.compile(r"(?:errno|errcode|error)\W{0,3}28\b|no space left on device", re.IGNORECASE)
# What to do, for errors no wait can fix.
_ADVICE = {
    1044: "grant Ax3l's database user all rights on its database (docs/operations.md)",
    1045: "check DB_USER and DB_PASSWORD (the login was refused)",
    1049: "create the database, or fix AX3L_DB_NAME / AX3L_SNAKELAB_DB_NAME",
    1142: "grant the missing privilege: all rights on Ax3l's database, SELECT on SnakeLab's",
    1143: "grant the missing privilege: all rights on Ax3l's database, SELECT on SnakeLab's",
    1227: "grant the missing privilege (docs/operations.md)",
    1370: "grant the missing privilege (docs/operations.md)",
    1698: "check DB_USER and DB_PASSWORD (the login was refused)",
}


def error_code(exc: BaseException) -> int | None:
    """The MySQL error number of a driver exception, if it has one."""
    return exc.args[0] if exc.args and isinstance(exc.args[0], int) else None


def translate(exc: BaseException, doing: str) -> DatabaseError:
    """A domain error for a driver exception raised while ``doing`` something."""
    code = error_code(exc)
    detail = exc.args[1] if len(exc.args) > 1 else str(exc)
    if code in _DISK_FULL_CODES or (code in _ERRNO_CODES and _ENOSPC.search(str(detail))):
        return DiskFull(
            f"{doing}: disk full on the database server ({code}: {detail}); the transaction"
            " was rolled back: free space on the database server's disk"
        )
    if code in _TIMEOUT_CODES:
        return DatabaseTimeout(f"{doing}: the database gave up on the statement ({code}: {detail})")
    if isinstance(exc, (ConnectionError, OSError)) or code in _CONNECTION_CODES:
        return DatabaseUnavailable(f"{doing}: database unavailable ({code}: {detail})")
    if code in _ADVICE:
        return DatabaseMisconfigured(
            f"{doing}: database error ({code}: {detail}); waiting will not fix this:"
            f" {_ADVICE[code]}"
        )
    if isinstance(exc, pymysql.err.MySQLError):
        return DatabaseError(f"{doing}: database error ({code}: {detail})")
    return DatabaseError(f"{doing}: {type(exc).__name__}: {exc}")
