"""The events writer: an event, its message and its highscore row in one transaction.

An event is written as its content model (``ax3l.shared.event_models``), which names it:
``log.log(ProposalAccepted(...), process_id=...)``; every writer in the services does. The
older form, a name and a dict (``log.log("proposal_accepted", {...})``), stores the same bytes
and stays for the tests and tools that still use it, and for a test's row no model builds.

An event's stored content is at most ``MAX_CONTENT_BYTES`` (1 MiB, far above any event Ax3l
writes): a larger one is stored as ``{"truncated": true, "event": ..., "bytes": ..., "head":
...}`` with its first ``TRUNCATED_HEAD_CHARS`` characters, so no caller (nor anything a caller
passes on from outside) can make one row grow without bound.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ax3l.shared.db.database import Database
from ax3l.shared.event_models import EventContent
from ax3l.shared.events import category_of, default_level

MAX_CONTENT_BYTES = 1024 * 1024
TRUNCATED_HEAD_CHARS = 4096


@dataclass(frozen=True)
class HighscoreRow:
    """A point of the /experiment-highscores plot, stored with its golden-creation event."""

    simulations: int
    score: int
    seed: int | None


def to_content(content: Any) -> str:
    """The stored text of an event: strings as they are, everything else as strict JSON."""
    if isinstance(content, EventContent):
        content = content.stored()
    if isinstance(content, str):
        return content
    return json.dumps(content, allow_nan=False, ensure_ascii=False, default=_json_default)


def capped_content(name: str, text: str) -> str:
    """``text``, or its truncation marker when it is over ``MAX_CONTENT_BYTES``."""
    if len(text) * 4 <= MAX_CONTENT_BYTES:  # a character is at most 4 bytes in UTF-8
        return text
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_CONTENT_BYTES:
        return text
    head = text[:TRUNCATED_HEAD_CHARS]
    marker = {"truncated": True, "event": name, "bytes": size, "head": head}
    return json.dumps(marker, ensure_ascii=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _named(event: EventContent | str, content: Any) -> tuple[str, Any]:
    """The name and content of either call form (a model, or a name and its content)."""
    if isinstance(event, EventContent):
        if content is not None:
            raise TypeError(f"{type(event).__name__} is the content; pass no other")
        return event.event, event
    if isinstance(content, EventContent) and content.event != event:
        raise ValueError(f"{type(content).__name__} is the content of {content.event}, not {event}")
    return event, content


async def write_event(
    cur: Any,
    event: EventContent | str,
    content: Any = None,
    *,
    level: str | None = None,
    process_id: str | None = None,
    parent_event_id: int | None = None,
    source_name: str | None = None,
    parameter: str | None = None,
    ax3l_version: str | None = None,
    highscore: HighscoreRow | None = None,
) -> int:
    """Insert an event (and its message and highscore row) with ``cur``; returns its id.

    ``event`` is the content model, or (the older form) the event's name with ``content``.
    Use inside a caller's transaction when the event must commit together with other rows.
    """
    name, content = _named(event, content)
    category = category_of(name)
    await cur.execute(
        "INSERT INTO events (occurred_at, name, category, log_level, process_id,"
        " parent_event_id, source_name, parameter, ax3l_version)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            datetime.now(UTC).replace(tzinfo=None),
            name,
            category.value,
            str(level or default_level(name)),
            process_id,
            parent_event_id,
            source_name,
            parameter,
            ax3l_version,
        ),
    )
    event_id = int(cur.lastrowid)
    if content is not None:
        await cur.execute(
            "INSERT INTO event_messages (event_id, content) VALUES (%s, %s)",
            (event_id, capped_content(name, to_content(content))),
        )
    if highscore is not None:
        await cur.execute(
            "INSERT INTO experiment_highscores (event_id, simulations, score, seed)"
            " VALUES (%s, %s, %s, %s)",
            (event_id, highscore.simulations, highscore.score, highscore.seed),
        )
    return event_id


class EventLog:
    """Writes events for one service, stamping its version."""

    def __init__(self, db: Database, ax3l_version: str | None = None):
        self.db = db
        self.ax3l_version = ax3l_version or db.settings.ax3l_version

    async def log(self, event: EventContent | str, content: Any = None, **fields: Any) -> int:
        """Write one event (its model, or a name and content) in its own transaction; returns
        its id."""
        name, content = _named(event, content)
        async with self.db.transaction(f"logging event {name}") as cur:
            return await self.write(cur, name, content, **fields)

    async def write(
        self, cur: Any, event: EventContent | str, content: Any = None, **fields: Any
    ) -> int:
        """Write one event (its model, or a name and content) inside the caller's transaction."""
        fields.setdefault("ax3l_version", self.ax3l_version)
        return await write_event(cur, event, content, **fields)
