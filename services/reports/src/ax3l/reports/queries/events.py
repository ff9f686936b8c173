"""Reading the event log: keyset pages (never OFFSET), filters as bound parameters, details."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ax3l.reports import event_contents
from ax3l.reports.models.events import Event, EventDetail, EventPage
from ax3l.shared.db.database import Database

# Long enough for a whole configuration (about 550 characters) and the fields stored after it,
# so the list's sentences can read them from the excerpt.
EXCERPT_CHARS = 1500

EVENT_COLUMNS = (
    "e.event_id, e.occurred_at, e.name, e.category, e.log_level, e.process_id,"
    " e.parent_event_id, e.source_name, e.parameter, e.ax3l_version"
)


@dataclass(frozen=True)
class EventFilter:
    """Which events to list; None means any. ``name`` implies its category."""

    category: str | None = None
    name: str | None = None
    parameter: str | None = None
    process_id: str | None = None

    def where(self) -> tuple[list[str], list[Any]]:
        # A name belongs to one category: with a name, the category adds nothing.
        filters = (
            ("e.name", self.name),
            ("e.category", self.category if self.name is None else None),
            ("e.parameter", self.parameter),
            ("e.process_id", self.process_id),
        )
        used = [(column, value) for column, value in filters if value is not None]
        return [f"{column} = %s" for column, _ in used], [value for _, value in used]


def event_record(row: dict[str, Any]) -> Event:
    """An event row (with its content, cut or whole, or without) as the report shows it."""
    content = row.get("content")
    return Event(
        event_id=int(row["event_id"]),
        occurred_at=row["occurred_at"],
        name=row["name"],
        label=event_contents.label(row["name"]),
        category=row["category"],
        log_level=row["log_level"],
        process_id=row["process_id"],
        parent_event_id=row["parent_event_id"],
        source_name=row["source_name"],
        parameter=row["parameter"],
        ax3l_version=row["ax3l_version"],
        summary=event_contents.summary(
            row["name"], content, parameter=row["parameter"], source_name=row["source_name"]
        ),
        content=content,
        truncated=bool(row.get("truncated", False)),
    )


def _keyset(
    where: EventFilter, bound: str, cursor: int | None, newest_first: bool, n: int
) -> tuple[str, list[Any]]:
    clauses, args = where.where()
    if cursor is not None:
        clauses.append(f"e.event_id {bound} %s")
        args.append(cursor)
    sql = "SELECT e.event_id FROM events e"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += f" ORDER BY e.event_id {'DESC' if newest_first else 'ASC'} LIMIT %s"
    return sql, [*args, n]


async def _exists(db: Database, where: EventFilter, bound: str, cursor: int) -> bool:
    sql, args = _keyset(where, bound, cursor, bound == "<", 1)
    return await db.fetchone(sql, args, doing="paging events") is not None


async def _page_rows(
    db: Database, where: EventFilter, bound: str, cursor: int | None, newest_first: bool, n: int
) -> list[dict[str, Any]]:
    keyset, args = _keyset(where, bound, cursor, newest_first, n)
    # The keyset picks ids from an index alone; contents are joined for those ids only. Replies
    # are kept whole so the list can show their tool call; other contents are cut.
    rows = await db.fetchall(
        f"SELECT {EVENT_COLUMNS},"
        " CASE WHEN e.name = 'reply_received' THEN m.content"
        f" ELSE LEFT(m.content, {EXCERPT_CHARS}) END AS content,"
        f" CHAR_LENGTH(m.content) > {EXCERPT_CHARS} AS truncated"
        f" FROM ({keyset}) page JOIN events e ON e.event_id = page.event_id"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id"
        " ORDER BY e.event_id DESC",
        args,
        doing="listing events",
    )
    for row in rows:
        row["truncated"] = bool(row["truncated"]) and row["name"] != "reply_received"
    return rows


async def event_page(
    db: Database,
    where: EventFilter,
    *,
    limit: int,
    before: int | None = None,
    after: int | None = None,
) -> EventPage:
    """One page of events; ``before`` pages towards older events, ``after`` towards newer."""
    if after is not None:
        rows = await _page_rows(db, where, ">", after, False, limit + 1)
        # Sorted newest first: the surplus row, if any, is the newest one.
        more_newer = len(rows) > limit
        rows = rows[-limit:] if more_newer else rows
        more_older = bool(rows) and await _exists(db, where, "<", rows[-1]["event_id"])
    else:
        rows = await _page_rows(db, where, "<", before, True, limit + 1)
        more_older = len(rows) > limit
        rows = rows[:limit]
        more_newer = (
            before is not None and bool(rows) and await _exists(db, where, ">", rows[0]["event_id"])
        )
    return EventPage(
        events=[event_record(row) for row in rows],
        newer_after=int(rows[0]["event_id"]) if rows and more_newer else None,
        older_before=int(rows[-1]["event_id"]) if rows and more_older else None,
    )


async def event_detail(db: Database, event_id: int, children: int = 50) -> EventDetail | None:
    """One event with its whole content (a reply's also parsed), its parent and its first
    ``children`` children (a prompt's replies, a submission's completion), or None."""
    row = await db.fetchone(
        f"SELECT {EVENT_COLUMNS}, m.content FROM events e"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id WHERE e.event_id = %s",
        (event_id,),
        doing=f"reading event {event_id}",
    )
    if row is None:
        return None
    content = event_contents.parse(row["content"])
    parent = None
    if row["parent_event_id"] is not None:
        parent = await db.fetchone(
            f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.event_id = %s",
            (int(row["parent_event_id"]),),
            doing=f"reading event {row['parent_event_id']}",
        )
    followers = await db.fetchall(
        f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.parent_event_id = %s"
        " ORDER BY e.event_id LIMIT %s",
        (event_id, children),
        doing=f"reading the children of event {event_id}",
    )
    return EventDetail(
        event=event_record({**row, "content": None}),
        content=content,
        reply=event_contents.read_reply(content) if row["name"] == "reply_received" else None,
        parent=None if parent is None else event_record(parent),
        children=[event_record(child) for child in followers],
    )


async def history_mark(db: Database) -> tuple[tuple[int, Any] | None, int]:
    """Which event history this is (its first event's id and time; None when empty) and its
    newest event id: what the in-memory tables (runs, proposers) compare to notice a wiped,
    recreated or rolled-back history and to read only the events after the last they saw."""
    first, top = await asyncio.gather(
        db.fetchone(
            "SELECT event_id, occurred_at FROM events ORDER BY event_id LIMIT 1",
            doing="reading the event history",
        ),
        db.fetchone("SELECT MAX(event_id) AS newest FROM events", doing="reading events"),
    )
    history = None if first is None else (int(first["event_id"]), first["occurred_at"])
    return history, int(top["newest"] or 0) if top else 0
