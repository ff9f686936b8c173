"""The in-memory twin of Ax3l's events (``ax3l.shared.db.event_store.EventStore``), for tests of
rules.

It lives here, not in the product: no service runs on it, and a store that only tests use must
not count as product code or be mistaken for a backend. ``shared/tests/contract/`` runs the same
tests on it and on MariaDB, so what a rule's test shows on the twin holds on the real store.

Same semantics as ``MariaDBEvents``: ids from 1, increasing, never reused (not even after
``clear``); reads oldest first; ``select``'s filters, ``newest``/``oldest``; a content stored as
text (``to_content``, capped at 1 MiB by ``capped_content``) and read back by
``parse_message``; an unknown event name, or a parent event that is not stored, is refused.
Not modelled: MariaDB's case-insensitive collation (``name``/``process_id`` compare exactly
here) and column lengths; SQL through a cursor (a rule that needs a transaction stays on
MariaDB).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.event_log import HighscoreRow, _named, capped_content, to_content
from ax3l.shared.db.event_reads import Names, StoredEvent, event_names, stored_event
from ax3l.shared.db.event_store import EventStore
from ax3l.shared.event_models import EventContent
from ax3l.shared.events import category_of, default_level

# ``select``'s filters: the column each compares, and how (as ``event_reads._FILTERS``).
_FILTERS: dict[str, Callable[[dict[str, Any], Any], bool]] = {
    "after": lambda row, value: row["event_id"] > value,
    "before": lambda row, value: row["event_id"] < value,
    "process_id": lambda row, value: row["process_id"] == value,
    "parent": lambda row, value: row["parent_event_id"] == value,
    "source_name": lambda row, value: row["source_name"] == value,
    "level": lambda row, value: row["log_level"] == value,
}


@dataclass(frozen=True)
class _Row:
    event: dict[str, Any]  # the ``events`` columns and the message's ``content`` (or None)
    highscore: HighscoreRow | None


class MemoryEvents(EventStore):
    """Events in a list, in id order."""

    def __init__(self) -> None:
        self._rows: list[_Row] = []
        self._last_id = 0

    def clear(self) -> None:
        """Delete every event (as ``ax3l-db reset-events`` does); ids go on increasing."""
        self._rows.clear()

    async def log(
        self,
        event: EventContent | str,
        content: Any = None,
        *,
        level: str | None = None,
        process_id: str | None = None,
        parent_event_id: int | None = None,
        source_name: str | None = None,
        parameter: str | None = None,
        highscore: HighscoreRow | None = None,
    ) -> int:
        name, content = _named(event, content)
        category = category_of(name)
        if parent_event_id is not None and not await self.has_event(parent_event_id):
            raise DatabaseError(f"logging event {name}: no parent event {parent_event_id}")
        self._last_id += 1
        text = None if content is None else capped_content(name, to_content(content))
        row = {
            "event_id": self._last_id,
            "occurred_at": datetime.now(UTC).replace(tzinfo=None),
            "name": name,
            "category": category.value,
            "log_level": str(level or default_level(name)),
            "process_id": process_id,
            "parent_event_id": parent_event_id,
            "source_name": source_name,
            "parameter": parameter,
            "content": text,
        }
        self._rows.append(_Row(row, highscore))
        return self._last_id

    def _matching(self, names: Any, filters: dict[str, Any]) -> list[_Row]:
        wanted = set(event_names(names))
        process_ids = filters.pop("process_ids", None)
        checks = [(_FILTERS[key], value) for key, value in filters.items() if value is not None]
        return [
            row
            for row in self._rows
            if row.event["name"] in wanted
            and (process_ids is None or row.event["process_id"] in process_ids)
            and all(check(row.event, value) for check, value in checks)
        ]

    async def select(
        self, names: Any, *, newest: int | None = None, oldest: int | None = None, **filters: Any
    ) -> list[StoredEvent[Any]]:
        rows = self._matching(names, dict(filters))
        if newest is not None:
            rows = rows[max(len(rows) - newest, 0) :]
        elif oldest is not None:
            rows = rows[:oldest]
        return [stored_event(row.event) for row in rows]

    async def count(
        self,
        names: type[EventContent] | Names,
        *,
        after: int | None = None,
        source_name: str | None = None,
        level: str | None = None,
    ) -> int:
        filters = {"after": after, "source_name": source_name, "level": level}
        return len(self._matching(names, filters))

    async def latest_golden_row(self) -> dict[str, Any] | None:
        for row in reversed(self._rows):
            event = row.event
            if event["name"] == "golden_config_created" and event["content"] is not None:
                score = row.highscore
                return {
                    "event_id": event["event_id"],
                    "occurred_at": event["occurred_at"],
                    "content": event["content"],
                    "score": None if score is None else score.score,
                    "seed": None if score is None else score.seed,
                    "simulations": None if score is None else score.simulations,
                }
        return None

    async def has_event(self, event_id: int) -> bool:
        return any(row.event["event_id"] == event_id for row in self._rows)
