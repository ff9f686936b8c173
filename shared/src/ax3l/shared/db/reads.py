"""The golden configuration, as the loop, the broker and the reports read it.

SnakeLab's tables are read in ``ax3l.shared.db.snakelab_reads``.
"""

from __future__ import annotations

from typing import Any

from ax3l.shared.db.event_reads import parse_message
from ax3l.shared.db.event_store import EventSource, events_of
from ax3l.shared.event_models import GoldenConfigCreated


async def latest_golden_row(db: EventSource) -> dict[str, Any] | None:
    """The newest ``golden_config_created`` event that has a content (one without was made by
    hand): ``event_id``, ``occurred_at``, ``content`` as stored, and ``score``, ``seed``,
    ``simulations`` of its ``experiment_highscores`` row (None without one). The loop, the
    broker and the reports' pages all read this row."""
    return await events_of(db).latest_golden_row()


def read_golden(content: str | None, *, strict: bool) -> GoldenConfigCreated:
    """A stored golden content as its model.

    Strict (the loop and the broker): a content without one of the model's required fields
    raises ``ValidationError``, and values convert as the loop has always read them (pydantic's
    lax mode: ``41.0`` or ``"41"`` for a high score). Lenient (the reports' pages): never fails,
    a field that is missing or does not fit reads None (``EventContent.from_stored``).
    """
    parsed = parse_message(content)
    if strict:
        return GoldenConfigCreated.model_validate(parsed, strict=False)
    return GoldenConfigCreated.from_stored(parsed)


async def current_golden(db: EventSource) -> tuple[int, GoldenConfigCreated] | None:
    """The latest ``golden_config_created`` event id and content, read strictly
    (``read_golden``), or None before seeding."""
    row = await latest_golden_row(db)
    if row is None:
        return None
    return int(row["event_id"]), read_golden(row["content"], strict=True)
