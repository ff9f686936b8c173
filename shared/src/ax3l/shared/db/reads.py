"""The golden configuration, as the loop and the broker read it.

SnakeLab's tables are read in ``ax3l.shared.db.snakelab_reads``.
"""

from __future__ import annotations

import json

from ax3l.shared.db.database import Database
from ax3l.shared.event_models import GoldenConfigCreated


async def current_golden(db: Database) -> tuple[int, GoldenConfigCreated] | None:
    """The latest ``golden_config_created`` event id and content, or None before seeding.

    Unlike the reports' lenient reads, this one is strict about what the loop needs: a content
    without one of the model's required fields raises ``ValidationError``. Values convert as
    the loop has always read them (pydantic's lax mode: ``41.0`` or ``"41"`` for a high score).
    """
    row = await db.fetchone(
        "SELECT e.event_id, m.content FROM events e"
        " JOIN event_messages m ON m.event_id = e.event_id"
        " WHERE e.name = 'golden_config_created' ORDER BY e.event_id DESC LIMIT 1",
        doing="reading the golden configuration",
    )
    if row is None:
        return None
    content = json.loads(row["content"])
    return int(row["event_id"]), GoldenConfigCreated.model_validate(content, strict=False)
