"""The events as the rules read them: one surface, MariaDB behind it in the product.

``EventStore`` is the surface (the shape of Optuna's ``BaseStorage``): write an event, read
events by name with ``select``'s filters, ``latest``, ``count``, the current golden's row, and
whether an event is still there. ``MariaDBEvents`` is the product's store: the statements of
``event_log`` and ``event_reads``, unchanged. The rules (``ax3l.shared.turn_state``,
``ax3l.shared.cycles``, ``ax3l.shared.db.reads``) take a ``Database`` or any ``EventStore``
(``events_of``), so their tests can run on the in-memory twin of ``ax3l.testing.memory_store``;
``shared/tests/contract/`` pins that both stores behave the same.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, TypeVar, Unpack, overload

from ax3l.shared.db import event_reads
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.db.event_reads import Filters, Names, StoredEvent
from ax3l.shared.event_models import EventContent

C = TypeVar("C", bound=EventContent)

LATEST_GOLDEN = (
    "SELECT e.event_id, e.occurred_at, m.content, h.score, h.seed, h.simulations"
    " FROM events e JOIN event_messages m ON m.event_id = e.event_id"
    " LEFT JOIN experiment_highscores h ON h.event_id = e.event_id"
    " WHERE e.name = 'golden_config_created' ORDER BY e.event_id DESC LIMIT 1"
)


class EventStore(ABC):
    """Ax3l's events: written one at a time, ids increasing, read oldest first.

    Contents are stored as text (``event_log.to_content``, capped at
    ``event_log.MAX_CONTENT_BYTES``) and read back with ``event_reads.parse_message``.
    """

    @abstractmethod
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
        """Write one event (``EventLog.log``'s call forms); returns its id."""

    @overload
    async def select(
        self,
        names: type[C],
        *,
        newest: int | None = ...,
        oldest: int | None = ...,
        **filters: Unpack[Filters],
    ) -> list[StoredEvent[C]]: ...

    @overload
    async def select(
        self,
        names: Names,
        *,
        newest: int | None = ...,
        oldest: int | None = ...,
        **filters: Unpack[Filters],
    ) -> list[StoredEvent[Any]]: ...

    @abstractmethod
    async def select(
        self,
        names: type[C] | Names,
        *,
        newest: int | None = None,
        oldest: int | None = None,
        **filters: Unpack[Filters],
    ) -> list[StoredEvent[Any]]:
        """Events of ``names`` matching every given filter, oldest first (only the ``oldest``
        n, or the ``newest`` n): ``event_reads.select``."""

    @overload
    async def latest(self, names: type[C], **filters: Any) -> StoredEvent[C] | None: ...

    @overload
    async def latest(self, names: Names, **filters: Any) -> StoredEvent[Any] | None: ...

    async def latest(self, names: type[C] | Names, **filters: Any) -> StoredEvent[Any] | None:
        """The newest event of ``names`` matching every given filter."""
        found = await self.select(names, newest=1, **filters)
        return found[0] if found else None

    @abstractmethod
    async def count(
        self,
        names: type[EventContent] | Names,
        *,
        after: int | None = None,
        source_name: str | None = None,
        level: str | None = None,
    ) -> int:
        """How many events of ``names`` match the filters."""

    @abstractmethod
    async def latest_golden_row(self) -> dict[str, Any] | None:
        """``reads.latest_golden_row``: the newest ``golden_config_created`` with a content."""

    @abstractmethod
    async def has_event(self, event_id: int) -> bool:
        """Whether the event ``event_id`` is still stored (a reset deletes them all)."""


class MariaDBEvents(EventStore):
    """The product's events: ``event_log``'s writer and ``event_reads``' statements on ``db``
    (a ``Database``, or for reads a cursor of the caller's transaction)."""

    def __init__(self, db: Any):
        self.db = db

    async def log(self, event: EventContent | str, content: Any = None, **fields: Any) -> int:
        return await EventLog(self.db).log(event, content, **fields)

    async def select(
        self, names: Any, *, newest: int | None = None, oldest: int | None = None, **filters: Any
    ) -> list[StoredEvent[Any]]:
        return await event_reads.select(self.db, names, newest=newest, oldest=oldest, **filters)

    async def count(
        self,
        names: type[EventContent] | Names,
        *,
        after: int | None = None,
        source_name: str | None = None,
        level: str | None = None,
    ) -> int:
        return await event_reads.count(
            self.db, names, after=after, source_name=source_name, level=level
        )

    async def latest_golden_row(self) -> dict[str, Any] | None:
        return await self.db.fetchone(  # type: ignore[no-any-return]
            LATEST_GOLDEN, doing="reading the golden configuration"
        )

    async def has_event(self, event_id: int) -> bool:
        row = await self.db.fetchone(
            "SELECT 1 AS present FROM events WHERE event_id = %s",
            (event_id,),
            doing="checking the event history",
        )
        return row is not None


EventSource = Database | EventStore


def events_of(source: EventSource) -> EventStore:
    """``source`` as an ``EventStore``: itself, or the MariaDB events of a ``Database``."""
    return source if isinstance(source, EventStore) else MariaDBEvents(source)
