"""The turn board: the one round-robin turn open to the seats, handed over in memory.

The orchestrator's ``external`` proposer opens a turn on the board after it wrote the turn's
checkpoint and closes it when the turn is answered or its deadline passed; the seats' endpoint
reads it to answer ``current_turn`` and to forward submissions, one at a time (``lock``).
The board remembers who won the last ``RECENT`` turns closed (None: no seat), for the seats'
share (``AX3L_SEAT_TURN_SHARE``).
"""

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ax3l.orchestrator.prompts import Prompt
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.shared.registry import Entry

RECENT = 100


@dataclass
class OpenTurn:
    """A turn offered to the seats, from its opening until it is answered or closed."""

    entry: Entry
    index: int
    checkpoint_event_id: int
    conversation_id: str
    started_event_id: int
    golden: GoldenConfigCreated
    prompts: list[Prompt]
    deadline_seconds: float
    opened_at: float = field(default_factory=time.monotonic)
    # What current_turn answers (``seconds_left`` apart), when built where the turn opened.
    payload: dict[str, Any] | None = None
    winner: str | None = None
    run_id: str | None = None
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    def age(self) -> float:
        return time.monotonic() - self.opened_at

    def remaining(self) -> float:
        return max(0.0, self.deadline_seconds - self.age())


class TurnBoard:
    """The one turn open to the seats (or none); submissions are handled one at a time."""

    def __init__(self) -> None:
        self.turn: OpenTurn | None = None
        self.lock = asyncio.Lock()
        self.recent: deque[str | None] = deque(maxlen=RECENT)

    def open(self, turn: OpenTurn) -> None:
        self.turn = turn

    async def close(self, turn: OpenTurn) -> None:
        """No more submissions for ``turn``; waits for one being forwarded to finish."""
        async with self.lock:
            if self.turn is turn:
                self.turn = None
                self.recent.append(turn.winner)

    def won_recently(self, seat: str, turns: int) -> int:
        """How many of the last ``turns`` closed turns ``seat`` won."""
        return list(self.recent)[-turns:].count(seat)
