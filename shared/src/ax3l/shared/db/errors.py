"""Domain errors for database access: callers never see driver exceptions."""

from __future__ import annotations

import pymysql


class DatabaseError(RuntimeError):
    """A database operation failed; the message says which and why."""


class DatabaseUnavailable(DatabaseError):
    """The server could not be reached or dropped the connection."""


class SchemaMismatch(DatabaseError):
    """The tables in the database are not the ones this version of Ax3l expects."""


_CONNECTION_CODES = {1040, 1045, 1049, 2002, 2003, 2005, 2006, 2013, 2055}


def translate(exc: BaseException, doing: str) -> DatabaseError:
    """A domain error for a driver exception raised while ``doing`` something."""
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    detail = exc.args[1] if len(exc.args) > 1 else str(exc)
    if isinstance(exc, (ConnectionError, OSError)) or code in _CONNECTION_CODES:
        return DatabaseUnavailable(f"{doing}: database unavailable ({code}: {detail})")
    if isinstance(exc, pymysql.err.MySQLError):
        return DatabaseError(f"{doing}: database error ({code}: {detail})")
    return DatabaseError(f"{doing}: {type(exc).__name__}: {exc}")
