"""Reads of Ax3l's own events: the loop's whole memory lives in them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ax3l.shared.db.database import Database

_SELECT = (
    "SELECT e.event_id, e.name, e.log_level, e.process_id, e.parent_event_id, e.source_name,"
    " e.parameter, m.content FROM events e LEFT JOIN event_messages m ON m.event_id = e.event_id"
)


@dataclass(frozen=True)
class StoredEvent:
    """One row of ``events`` with its message (JSON parsed when it is JSON)."""

    event_id: int
    name: str
    log_level: str
    process_id: str | None
    parent_event_id: int | None
    source_name: str | None
    parameter: str | None
    content: Any

    def field(self, name: str, default: Any = None) -> Any:
        """A key of a JSON object content, ``default`` when absent or not an object."""
        if isinstance(self.content, dict):
            return self.content.get(name, default)
        return default


def _parse(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _event(row: dict[str, Any]) -> StoredEvent:
    parent = row["parent_event_id"]
    return StoredEvent(
        event_id=int(row["event_id"]),
        name=row["name"],
        log_level=row["log_level"],
        process_id=row["process_id"],
        parent_event_id=None if parent is None else int(parent),
        source_name=row["source_name"],
        parameter=row["parameter"],
        content=_parse(row["content"]),
    )


async def latest(
    db: Database,
    names: str | Sequence[str],
    *,
    after: int | None = None,
    before: int | None = None,
    process_id: str | None = None,
    parent: int | None = None,
    source_name: str | None = None,
) -> StoredEvent | None:
    """The newest event with one of ``names`` matching every given filter."""
    found = await select(
        db,
        names,
        after=after,
        before=before,
        process_id=process_id,
        parent=parent,
        source_name=source_name,
        newest=1,
    )
    return found[0] if found else None


async def select(
    db: Database,
    names: str | Sequence[str],
    *,
    after: int | None = None,
    before: int | None = None,
    process_id: str | None = None,
    parent: int | None = None,
    source_name: str | None = None,
    newest: int | None = None,
) -> list[StoredEvent]:
    """Events with one of ``names`` matching the filters, oldest first (or the ``newest`` n)."""
    wanted = [names] if isinstance(names, str) else list(names)
    where = [f"e.name IN ({', '.join(['%s'] * len(wanted))})"]
    args: list[Any] = list(wanted)
    if after is not None:
        where.append("e.event_id > %s")
        args.append(after)
    if before is not None:
        where.append("e.event_id < %s")
        args.append(before)
    if process_id is not None:
        where.append("e.process_id = %s")
        args.append(process_id)
    if parent is not None:
        where.append("e.parent_event_id = %s")
        args.append(parent)
    if source_name is not None:
        where.append("e.source_name = %s")
        args.append(source_name)
    sql = f"{_SELECT} WHERE {' AND '.join(where)}"
    if newest is not None:
        sql += " ORDER BY e.event_id DESC LIMIT %s"
        args.append(newest)
    else:
        sql += " ORDER BY e.event_id"
    rows = await db.fetchall(sql, args, doing=f"reading {', '.join(wanted)} events")
    events = [_event(row) for row in rows]
    if newest is not None:
        events.reverse()
    return events
