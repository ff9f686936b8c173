"""Reading the event log: keyset pages (never OFFSET), filters as bound parameters, details."""

from __future__ import annotations

from typing import Any

from ax3l.reports import event_contents
from ax3l.reports.models.events import Event, EventDetail, EventPage
from ax3l.shared.db import report_reads
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import parse_message
from ax3l.shared.db.report_reads import EventFilter


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
        rows = await report_reads.event_page_rows(db, where, False, after, limit + 1)
        # Sorted newest first: the surplus row, if any, is the newest one.
        more_newer = len(rows) > limit
        rows = rows[-limit:] if more_newer else rows
        more_older = bool(rows) and await report_reads.event_beyond(
            db, where, True, rows[-1]["event_id"]
        )
    else:
        rows = await report_reads.event_page_rows(db, where, True, before, limit + 1)
        more_older = len(rows) > limit
        rows = rows[:limit]
        more_newer = (
            before is not None
            and bool(rows)
            and await report_reads.event_beyond(db, where, False, rows[0]["event_id"])
        )
    return EventPage(
        events=[event_record(row) for row in rows],
        newer_after=int(rows[0]["event_id"]) if rows and more_newer else None,
        older_before=int(rows[-1]["event_id"]) if rows and more_older else None,
    )


async def event_detail(db: Database, event_id: int, children: int = 50) -> EventDetail | None:
    """One event with its whole content (a reply's also parsed), its parent and its first
    ``children`` children (a prompt's replies, a submission's completion), or None."""
    row = await report_reads.event_row(db, event_id, content=True)
    if row is None:
        return None
    content = parse_message(row["content"])
    parent = None
    if row["parent_event_id"] is not None:
        parent = await report_reads.event_row(db, int(row["parent_event_id"]), content=False)
    followers = await report_reads.child_rows(db, event_id, children)
    return EventDetail(
        event=event_record({**row, "content": None}),
        content=content,
        reply=event_contents.read_reply(content) if row["name"] == "reply_received" else None,
        parent=None if parent is None else event_record(parent),
        children=[event_record(child) for child in followers],
    )
