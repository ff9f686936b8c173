"""Typed reads of Ax3l's events: a stored row comes back with its content model.

``latest(db, ProposalAccepted, after=...)`` is the newest ``proposal_accepted`` row matching the
filters, and its ``.model`` a ``ProposalAccepted``. Events are named by their model or, where a
read spans several events, by their names. Reads take the ``Database`` or, inside a caller's
transaction, its cursor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, Generic, TypedDict, TypeVar, Unpack, overload

from ax3l.shared import untrusted_json
from ax3l.shared.db.database import placeholders
from ax3l.shared.event_models import EventContent, read_content

C = TypeVar("C", bound=EventContent)

_SELECT = (
    "SELECT e.event_id, e.name, e.log_level, e.process_id, e.parent_event_id, e.source_name,"
    " e.parameter, e.occurred_at, m.content"
    " FROM events e LEFT JOIN event_messages m ON m.event_id = e.event_id"
)

Names = str | type[EventContent] | Sequence[str | type[EventContent]]


@dataclass(frozen=True)
class StoredEvent(Generic[C]):
    """One row of ``events`` with its message: ``content`` as ``parse_message`` reads it,
    ``model`` as the event's content model."""

    event_id: int
    name: str
    log_level: str
    process_id: str | None
    parent_event_id: int | None
    source_name: str | None
    parameter: str | None
    content: Any
    occurred_at: datetime | None = None

    @cached_property
    def model(self) -> C:
        """The content as its event's model (``EventContent.from_stored``: never fails)."""
        return read_content(self.name, self.content)  # type: ignore[return-value]

    def field(self, name: str, default: Any = None) -> Any:
        """A key of a JSON object content as stored, ``default`` when absent or not an object."""
        if isinstance(self.content, dict):
            return self.content.get(name, default)
        return default


def parse_message(text: str | None) -> Any:
    """A stored ``event_messages.content``: its JSON when it is an object or an array, else the
    text itself.

    ``EventLog`` stores a string as it is and every other content as JSON, and no writer stores
    a bare JSON scalar: a stored ``42`` or ``"hi"`` is text (a prompt), and reads as that text.
    JSON no reader should take (``untrusted_json``: too deep, a lone surrogate) reads as text too.
    """
    if text is None:
        return None
    if text.lstrip()[:1] not in ("{", "["):
        return text
    try:
        return untrusted_json.loads(text)
    except ValueError:  # not JSON (or JSON no reader should take): the text
        return text


def stored_event(row: dict[str, Any]) -> StoredEvent[Any]:
    """A row of ``events`` joined with its ``content`` as a ``StoredEvent``."""
    parent = row["parent_event_id"]
    return StoredEvent(
        event_id=int(row["event_id"]),
        name=row["name"],
        log_level=row["log_level"],
        process_id=row["process_id"],
        parent_event_id=None if parent is None else int(parent),
        source_name=row["source_name"],
        parameter=row["parameter"],
        content=parse_message(row["content"]),
        occurred_at=row.get("occurred_at"),
    )


def event_names(names: Names) -> list[str]:
    """The event names of a model, a name, or a sequence of either."""
    if isinstance(names, str | type):
        names = [names]
    return [name if isinstance(name, str) else name.event for name in names]


@overload
async def latest(source: Any, names: type[C], **filters: Any) -> StoredEvent[C] | None: ...


@overload
async def latest(source: Any, names: Names, **filters: Any) -> StoredEvent[Any] | None: ...


async def latest(source: Any, names: type[C] | Names, **filters: Any) -> StoredEvent[C] | None:
    """The newest event of ``names`` matching every given filter (``select``'s)."""
    found: list[StoredEvent[C]] = await select(source, names, newest=1, **filters)
    return found[0] if found else None


def _where(names: Names, filters: dict[str, Any]) -> tuple[str, list[Any]]:
    wanted = event_names(names)
    where = [f"e.name IN ({placeholders(wanted)})"]
    args: list[Any] = list(wanted)
    process_ids = filters.pop("process_ids", None)
    if process_ids is not None:
        where.append(f"e.process_id IN ({placeholders(process_ids) or 'NULL'})")
        args.extend(process_ids)
    for key, value in filters.items():
        if value is not None:
            where.append(_FILTERS[key])
            args.append(value)
    return " WHERE " + " AND ".join(where), args


_FILTERS = {
    "after": "e.event_id > %s",
    "before": "e.event_id < %s",
    "process_id": "e.process_id = %s",
    "parent": "e.parent_event_id = %s",
    "source_name": "e.source_name = %s",
    "level": "e.log_level = %s",
}


async def _rows(source: Any, sql: str, args: list[Any], doing: str) -> list[dict[str, Any]]:
    if hasattr(source, "execute"):  # a cursor of the caller's transaction
        await source.execute(sql, args)
        return [dict(row) for row in await source.fetchall()]
    return list(await source.fetchall(sql, args, doing=doing))


class Filters(TypedDict, total=False):
    """``select``'s filters: each given one must match (None: no filter)."""

    after: int | None
    before: int | None
    process_id: str | None
    process_ids: Sequence[str] | None
    parent: int | None
    source_name: str | None
    level: str | None


@overload
async def select(
    source: Any,
    names: type[C],
    *,
    newest: int | None = ...,
    oldest: int | None = ...,
    doing: str | None = ...,
    **filters: Unpack[Filters],
) -> list[StoredEvent[C]]: ...


@overload
async def select(
    source: Any,
    names: Names,
    *,
    newest: int | None = ...,
    oldest: int | None = ...,
    doing: str | None = ...,
    **filters: Unpack[Filters],
) -> list[StoredEvent[Any]]: ...


async def select(
    source: Any,
    names: type[C] | Names,
    *,
    newest: int | None = None,
    oldest: int | None = None,
    doing: str | None = None,
    **filters: Unpack[Filters],
) -> list[StoredEvent[C]]:
    """Events of ``names`` matching the filters, oldest first (only the ``oldest`` n, or the
    ``newest`` n).

    ``source`` is the ``Database`` or a cursor of the caller's transaction; ``doing`` names
    the read in its errors (default: the events' names).
    """
    sql, args = _select_sql(names, newest, oldest, filters)
    doing = doing or f"reading {', '.join(event_names(names))} events"
    events = [stored_event(row) for row in await _rows(source, sql, args, doing)]
    if newest is not None:
        events.reverse()
    return events


def _select_sql(
    names: Names, newest: int | None, oldest: int | None, filters: Filters
) -> tuple[str, list[Any]]:
    where, args = _where(names, dict(filters))
    sql = _SELECT + where
    if newest is not None:
        sql += " ORDER BY e.event_id DESC LIMIT %s"
        args.append(newest)
    else:
        sql += " ORDER BY e.event_id"
        if oldest is not None:
            sql += " LIMIT %s"
            args.append(oldest)
    return sql, args


async def newest_id(source: Any, names: Names | None = None, *, doing: str) -> int | None:
    """The id of the newest event (of ``names``, when given); None when there is none."""
    where, args = _where(names, {}) if names is not None else ("", [])
    rows = await _rows(
        source, f"SELECT MAX(e.event_id) AS newest FROM events e{where}", args, doing
    )
    return None if not rows or rows[0]["newest"] is None else int(rows[0]["newest"])


async def count(
    source: Any,
    names: type[EventContent] | Names,
    *,
    after: int | None = None,
    source_name: str | None = None,
    level: str | None = None,
) -> int:
    """How many events of ``names`` match the filters (``select``'s)."""
    where, args = _where(names, {"after": after, "source_name": source_name, "level": level})
    rows = await _rows(
        source,
        "SELECT COUNT(*) AS n FROM events e" + where,
        args,
        f"counting {', '.join(event_names(names))} events",
    )
    return int(rows[0]["n"]) if rows else 0


# -- for blocking callers with a DB-API cursor of their own (``ax3l-compare``) ----------------


def select_on(
    cur: Any, names: Names, *, oldest: int | None = None, **filters: Unpack[Filters]
) -> list[StoredEvent[Any]]:
    """``select`` (oldest first) on a blocking cursor whose rows are tuples."""
    sql, args = _select_sql(names, None, oldest, filters)
    cur.execute(sql, args)
    columns = [d[0] for d in cur.description]
    return [stored_event(dict(zip(columns, row, strict=True))) for row in cur.fetchall()]


def first_event_id(cur: Any, process_id: str) -> int | None:
    """The id of process ``process_id``'s first event (a run's: its submission), or None."""
    cur.execute("SELECT MIN(event_id) FROM events WHERE process_id = %s", (process_id,))
    row = cur.fetchone()
    return None if row is None or row[0] is None else int(row[0])


def turn_rows(
    cur: Any, names: Sequence[str], prompt_source: str, through: int | None
) -> list[tuple[Any, ...]]:
    """``name, parameter, source_name, content`` (as stored; None for ``reply_received``,
    whose text is counted, never read), ``process_id`` and the ``conversation_id`` of its
    ``run_provenance`` row, of the events of ``names`` up to the event ``through`` (None: all),
    ``prompt_sent`` only from ``prompt_source``, in event order: what ``ax3l-compare`` counts
    a repeat's turns from."""
    cur.execute(
        "SELECT e.name, e.parameter, e.source_name,"
        " IF(e.name = 'reply_received', NULL, m.content), e.process_id, p.conversation_id"
        " FROM events e LEFT JOIN event_messages m ON m.event_id = e.event_id"
        " LEFT JOIN run_provenance p ON p.event_id = e.event_id"
        f" WHERE e.name IN ({placeholders(names)})"
        " AND (e.name <> 'prompt_sent' OR e.source_name = %s)"
        " AND (%s IS NULL OR e.event_id <= %s) ORDER BY e.event_id",
        (*names, prompt_source, through, through),
    )
    return list(cur.fetchall())
