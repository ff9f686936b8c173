"""Typed reads of Ax3l's events: a stored row comes back with its content model.

``latest(db, ProposalAccepted, after=...)`` is the newest ``proposal_accepted`` row matching the
filters, and its ``.model`` a ``ProposalAccepted``. Events are named by their model or, where a
read spans several events, by their names. Reads take the ``Database`` or, inside a caller's
transaction, its cursor.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar

from ax3l.shared.db.database import Database
from ax3l.shared.event_models import EventContent, read_content

C = TypeVar("C", bound=EventContent)

_SELECT = (
    "SELECT e.event_id, e.name, e.log_level, e.process_id, e.parent_event_id, e.source_name,"
    " e.parameter, m.content FROM events e LEFT JOIN event_messages m ON m.event_id = e.event_id"
)

Names = str | type[EventContent] | Sequence[str | type[EventContent]]


@dataclass(frozen=True)
class StoredEvent(Generic[C]):
    """One row of ``events`` with its message: ``content`` as parsed JSON (or the text when it
    is not JSON), ``model`` as the event's content model."""

    event_id: int
    name: str
    log_level: str
    process_id: str | None
    parent_event_id: int | None
    source_name: str | None
    parameter: str | None
    content: Any

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
    """A stored ``event_messages.content``: its JSON, or the text when it is not JSON."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
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
    )


def event_names(names: Names) -> list[str]:
    """The event names of a model, a name, or a sequence of either."""
    if isinstance(names, str | type):
        names = [names]
    return [name if isinstance(name, str) else name.event for name in names]


async def latest(source: Any, names: type[C] | Names, **filters: Any) -> StoredEvent[C] | None:
    """The newest event of ``names`` matching every given filter (``select``'s)."""
    found: list[StoredEvent[C]] = await select(source, names, newest=1, **filters)
    return found[0] if found else None


async def select(
    source: Any,
    names: type[C] | Names,
    *,
    after: int | None = None,
    before: int | None = None,
    process_id: str | None = None,
    parent: int | None = None,
    source_name: str | None = None,
    newest: int | None = None,
    oldest: int | None = None,
) -> list[StoredEvent[C]]:
    """Events of ``names`` matching the filters, oldest first (only the ``oldest`` n, or the
    ``newest`` n).

    ``source`` is the ``Database`` or a cursor of the caller's transaction.
    """
    wanted = event_names(names)
    where = [f"e.name IN ({', '.join(['%s'] * len(wanted))})"]
    args: list[Any] = list(wanted)
    for clause, value in (
        ("e.event_id > %s", after),
        ("e.event_id < %s", before),
        ("e.process_id = %s", process_id),
        ("e.parent_event_id = %s", parent),
        ("e.source_name = %s", source_name),
    ):
        if value is not None:
            where.append(clause)
            args.append(value)
    sql = f"{_SELECT} WHERE {' AND '.join(where)}"
    if newest is not None:
        sql += " ORDER BY e.event_id DESC LIMIT %s"
        args.append(newest)
    else:
        sql += " ORDER BY e.event_id"
        if oldest is not None:
            sql += " LIMIT %s"
            args.append(oldest)
    if isinstance(source, Database) or hasattr(source, "transaction"):
        rows = await source.fetchall(sql, args, doing=f"reading {', '.join(wanted)} events")
    else:
        await source.execute(sql, args)
        rows = list(await source.fetchall())
    events = [stored_event(dict(row)) for row in rows]
    if newest is not None:
        events.reverse()
    return events
