"""The report server's reads of ``events``, ``event_messages``, ``experiment_highscores`` and
``run_provenance``, bounded by keys (never OFFSET), as the report server's query modules
(``services/reports/src/ax3l/reports/queries/``) shape them.

Rows are the driver's dicts, contents stored text: the proposers' board folds up to a million
rows and parses few, which ``event_reads.select`` (every content parsed) would slow down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ax3l.shared.db.database import Database, grouped_lines, placeholders
from ax3l.shared.db.run_provenance import table_present

# Long enough for a whole configuration (about 550 characters) and the fields stored after it,
# so the list's sentences can read them from the excerpt.
EXCERPT_CHARS = 1500

EVENT_COLUMNS = (
    "e.event_id, e.occurred_at, e.name, e.category, e.log_level, e.process_id,"
    " e.parent_event_id, e.source_name, e.parameter, e.ax3l_version"
)
GOLDEN_COLUMNS = "e.event_id, e.occurred_at, m.content, h.score, h.seed, h.simulations"


# -- the event log ----------------------------------------------------------------------------


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


def _keyset(where: EventFilter, older: bool, cursor: int | None, n: int) -> tuple[str, list[Any]]:
    clauses, args = where.where()
    if cursor is not None:
        clauses.append(f"e.event_id {'<' if older else '>'} %s")
        args.append(cursor)
    sql = "SELECT e.event_id FROM events e"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += f" ORDER BY e.event_id {'DESC' if older else 'ASC'} LIMIT %s"
    return sql, [*args, n]


async def event_beyond(db: Database, where: EventFilter, older: bool, cursor: int) -> bool:
    """Whether an event matching ``where`` is older (else newer) than event ``cursor``."""
    sql, args = _keyset(where, older, cursor, 1)
    return await db.fetchone(sql, args, doing="paging events") is not None


async def event_page_rows(
    db: Database, where: EventFilter, older: bool, cursor: int | None, n: int
) -> list[dict[str, Any]]:
    """The ``n`` events matching ``where`` nearest to event ``cursor`` on its older (else
    newer) side (None: the newest), newest first: ``EVENT_COLUMNS``, ``content`` (a reply's
    whole, others' first ``EXCERPT_CHARS`` characters) and ``truncated`` (whether it was cut).
    The event log's pages (``reports/queries/events.py``)."""
    keyset, args = _keyset(where, older, cursor, n)
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


async def event_row(db: Database, event_id: int, *, content: bool) -> dict[str, Any] | None:
    """Event ``event_id``'s ``EVENT_COLUMNS`` (and with ``content`` its whole ``content``), or
    None: an event's page and its parent."""
    joined = ", m.content FROM events e LEFT JOIN event_messages m ON m.event_id = e.event_id"
    return await db.fetchone(
        f"SELECT {EVENT_COLUMNS}{joined if content else ' FROM events e'} WHERE e.event_id = %s",
        (event_id,),
        doing=f"reading event {event_id}",
    )


async def child_rows(db: Database, event_id: int, limit: int) -> list[dict[str, Any]]:
    """``EVENT_COLUMNS`` of the first ``limit`` events whose parent is ``event_id``."""
    return await db.fetchall(
        f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.parent_event_id = %s"
        " ORDER BY e.event_id LIMIT %s",
        (event_id, limit),
        doing=f"reading the children of event {event_id}",
    )


async def run_event_rows(db: Database, run_id: str, limit: int = 200) -> list[dict[str, Any]]:
    """The newest ``limit`` events of run ``run_id`` (its process id), newest first:
    ``event_id, occurred_at, name, category, log_level, parameter, source_name`` and
    ``content``'s first ``EXCERPT_CHARS`` characters. A run's page."""
    return await db.fetchall(
        "SELECT e.event_id, e.occurred_at, e.name, e.category, e.log_level, e.parameter,"
        f" e.source_name, LEFT(m.content, {EXCERPT_CHARS}) AS content FROM events e"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id"
        " WHERE e.process_id = %s ORDER BY e.event_id DESC LIMIT %s",
        (run_id, limit),
        doing=f"reading the events of run {run_id}",
    )


async def first_event(db: Database) -> tuple[int, datetime] | None:
    """The first event's id and time (None when there is none): which history this is."""
    row = await db.fetchone(
        "SELECT event_id, occurred_at FROM events ORDER BY event_id LIMIT 1",
        doing="reading the event history",
    )
    return None if row is None else (int(row["event_id"]), row["occurred_at"])


async def history_mark(db: Database) -> tuple[tuple[int, datetime] | None, int]:
    """Which event history this is (``first_event``) and its newest event id: what the
    in-memory tables (runs, proposers) compare to notice a wiped, recreated or rolled-back
    history and to read only the events after the last they saw."""
    history, top = await asyncio.gather(
        first_event(db),
        db.fetchone("SELECT MAX(event_id) AS newest FROM events", doing="reading events"),
    )
    return history, int(top["newest"] or 0) if top else 0


# -- golden configurations and high scores ----------------------------------------------------


async def golden_rows(db: Database, before: int | None, n: int) -> list[dict[str, Any]]:
    """The ``n`` newest ``golden_config_created`` events older than ``before`` (None: any),
    newest first: ``event_id, occurred_at, content`` and ``score, seed, simulations`` of its
    ``experiment_highscores`` row (None without one). The golden configurations' pages."""
    clauses = ["e.name = 'golden_config_created'"]
    args: list[Any] = []
    if before is not None:
        clauses.append("e.event_id < %s")
        args.append(before)
    return await db.fetchall(
        f"SELECT {GOLDEN_COLUMNS}"
        " FROM (SELECT e.event_id FROM events e WHERE "
        + " AND ".join(clauses)
        + " ORDER BY e.event_id DESC LIMIT %s) page"
        " JOIN events e ON e.event_id = page.event_id"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id"
        " LEFT JOIN experiment_highscores h ON h.event_id = e.event_id"
        " ORDER BY e.event_id DESC",
        (*args, n),
        doing="reading golden configurations",
    )


async def highscore_mark(db: Database) -> tuple[int, int]:
    """How many ``experiment_highscores`` rows there are and the newest one's event id (0)."""
    row = await db.fetchone(
        "SELECT COUNT(*) AS n, MAX(event_id) AS newest FROM experiment_highscores",
        doing="reading experiment high scores",
    )
    return (int(row["n"]), int(row["newest"] or 0)) if row else (0, 0)


async def highscore_rows(db: Database, after: int) -> list[dict[str, Any]]:
    """The ``experiment_highscores`` rows of the events after ``after``, in event order, with
    their event's time and content: ``golden_rows``' columns. The high-score series."""
    return await db.fetchall(
        f"SELECT {GOLDEN_COLUMNS}"
        " FROM experiment_highscores h JOIN events e ON e.event_id = h.event_id"
        " LEFT JOIN event_messages m ON m.event_id = h.event_id"
        " WHERE h.event_id > %s ORDER BY h.event_id",
        (after,),
        doing="reading experiment high scores",
    )


async def best_highscore(db: Database) -> int | None:
    """The best accepted score of the whole experiment (any seed), None before any."""
    row = await db.fetchone(
        "SELECT MAX(score) AS best FROM experiment_highscores", doing="reading the high score"
    )
    return None if row is None or row["best"] is None else int(row["best"])


# -- what the proposers' and seats' boards fold -----------------------------------------------


def _window(after: int, upto: int | None) -> tuple[str, tuple[int, ...]]:
    """The condition (and its arguments) keeping events after ``after`` up to ``upto``."""
    if upto is None:
        return " AND e.event_id > %s", (after,)
    return " AND e.event_id > %s AND e.event_id <= %s", (after, upto)


async def event_texts(
    db: Database, names: Sequence[str], *, doing: str, after: int = 0, upto: int | None = None
) -> list[dict[str, Any]]:
    """``event_id, name, process_id, source_name`` and ``content`` as stored of the events
    named ``names`` after ``after`` up to ``upto`` (None: the newest), in event order (the
    proposers', models' and seats' boards; ``doing`` names the read in its errors)."""
    window, args = _window(after, upto)
    return await db.fetchall(
        "SELECT e.event_id, e.name, e.process_id, e.source_name, m.content FROM events e"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id"
        f" WHERE e.name IN ({placeholders(names)}){window} ORDER BY e.event_id",
        (*names, *args),
        doing=doing,
    )


async def proposal_rows(
    db: Database, after: int = 0, upto: int | None = None
) -> list[dict[str, Any]]:
    """``event_id, run_id, proposer, conversation_id`` of the ``run_provenance`` rows of the
    proposals accepted after event ``after`` up to ``upto`` (not a retry's nor the loop's own
    runs), in event order; none without the table."""
    if not await table_present(db):
        return []
    window, args = _window(after, upto)
    return await db.fetchall(
        "SELECT e.event_id, e.run_id, e.proposer, e.conversation_id FROM run_provenance e"
        f" WHERE e.proposal_event_id = e.event_id{window} ORDER BY e.event_id",
        args,
        doing="reading proposals",
    )


async def model_requests(
    db: Database, after: int = 0, upto: int | None = None
) -> list[dict[str, Any]]:
    """Replies (``model``, ``completion_tokens``, ``prompt_ms``, ``predicted_ms``) and failed
    requests (``kind``, ``correctable``), each with ``event_id, name, process_id,
    occurred_at`` and its prompt's time (``asked_at``), of the events after ``after`` up to
    ``upto``, in event order; only these few fields are read from the contents."""
    window, args = _window(after, upto)
    return await db.fetchall(
        "SELECT e.event_id, e.name, e.process_id, e.occurred_at, p.occurred_at AS asked_at,"
        " CASE WHEN e.name = 'reply_received'"
        "  THEN JSON_UNQUOTE(JSON_EXTRACT(m.content, '$.model')) END AS model,"
        " CASE WHEN e.name = 'reply_received'"
        "  THEN JSON_EXTRACT(m.content, '$.usage.completion_tokens') END AS completion_tokens,"
        " CASE WHEN e.name = 'reply_received'"
        "  THEN JSON_EXTRACT(m.content, '$.timings.prompt_ms') END AS prompt_ms,"
        " CASE WHEN e.name = 'reply_received'"
        "  THEN JSON_EXTRACT(m.content, '$.timings.predicted_ms') END AS predicted_ms,"
        " CASE WHEN e.name = 'llm_request_failed'"
        "  THEN JSON_UNQUOTE(JSON_EXTRACT(m.content, '$.kind')) END AS kind,"
        " CASE WHEN e.name = 'llm_request_failed'"
        "  THEN JSON_EXTRACT(m.content, '$.correctable') END AS correctable"
        " FROM events e LEFT JOIN event_messages m ON m.event_id = e.event_id"
        " LEFT JOIN events p ON p.event_id = e.parent_event_id"
        f" WHERE e.name IN ('reply_received', 'llm_request_failed'){window} ORDER BY e.event_id",
        args,
        doing="reading the model's requests",
    )


# -- why runs were chosen, and the runs table's provenance --------------------------------------

REASON_EVENTS = ("conversation_started", "conversation_ended", "reply_received", "seat_call")
REASON_CHUNK = 500  # conversations per statement


async def reason_rows(db: Database, conversations: Sequence[str]) -> list[dict[str, Any]]:
    """``event_id, process_id, name, source_name, parameter, content`` of the
    ``REASON_EVENTS`` of ``conversations`` (process ids), in event order within each
    ``REASON_CHUNK`` of them; of the seat calls only accepted submissions (a seat's polls are
    seat calls too)."""
    found: list[dict[str, Any]] = []
    for start in range(0, len(conversations), REASON_CHUNK):
        chunk = conversations[start : start + REASON_CHUNK]
        found += await db.fetchall(
            "SELECT e.event_id, e.process_id, e.name, e.source_name, e.parameter, m.content"
            " FROM events e LEFT JOIN event_messages m ON m.event_id = e.event_id"
            f" WHERE e.process_id IN ({placeholders(chunk)})"
            f" AND e.name IN ({placeholders(REASON_EVENTS)})"
            " AND (e.name <> 'seat_call' OR (JSON_VALID(m.content)"
            " AND JSON_VALUE(m.content, '$.outcome') = 'accepted'))"
            " ORDER BY e.event_id",
            (*chunk, *REASON_EVENTS),
            doing="reading why runs were chosen",
        )
    return found


PROVENANCE_FIELDS = ("run_id", "note", "tag")
PROVENANCE_COLUMNS = ("run_id", "proposer", "entry", "golden_run_id", "conversation_id")


def _json(field_name: str) -> str:
    """A scalar of an event's JSON content as text (null for another shape or invalid JSON)."""
    return f"CASE WHEN JSON_VALID(m.content) THEN JSON_VALUE(m.content, '$.{field_name}') END"


async def provenance_event_blocks(
    db: Database, names: Sequence[str], start: int, end: int
) -> list[str]:
    """The events named ``names`` after ``start`` up to ``end``, each a JSON array of
    ``event_id, name, process_id`` and its content's ``PROVENANCE_FIELDS`` (text, null for
    another shape), in ``grouped_lines`` blocks joined by commas: the server escapes the
    contents' strings, the driver decodes one value per 500 events. The runs table."""
    fields = ", ".join(_json(name) for name in PROVENANCE_FIELDS)
    return await grouped_lines(
        db,
        f"SELECT e.event_id AS k, JSON_ARRAY(e.event_id, e.name, e.process_id, {fields})"
        " AS line FROM events e LEFT JOIN event_messages m ON m.event_id = e.event_id"
        f" WHERE e.event_id > %s AND e.event_id <= %s AND e.name IN ({placeholders(names)})",
        "k",
        (start, end, *names),
        ",",
    )


async def provenance_row_blocks(db: Database, start: int, end: int) -> list[str]:
    """The ``run_provenance`` rows of the events after ``start`` up to ``end``, each a JSON
    array of ``PROVENANCE_COLUMNS``, in ``grouped_lines`` blocks joined by commas."""
    return await grouped_lines(
        db,
        f"SELECT event_id AS k, JSON_ARRAY({', '.join(PROVENANCE_COLUMNS)}) AS line"
        " FROM run_provenance WHERE event_id > %s AND event_id <= %s",
        "k",
        (start, end),
        ",",
    )
