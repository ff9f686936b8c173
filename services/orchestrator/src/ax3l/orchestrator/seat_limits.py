"""How often a seat may call the seats' endpoint: ``AX3L_SEAT_RATE_LIMIT`` calls a minute."""

import time
from collections import deque
from collections.abc import Callable

RATE_WINDOW = 60.0


class RateLimiter:
    """At most ``limit`` calls per seat in any 60 s window."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic):
        self.limit = limit
        self.clock = clock
        self.calls: dict[str, deque[float]] = {}

    def admit(self, seat: str) -> float | None:
        """None when the call may go ahead, else the seconds until it could."""
        now = self.clock()
        calls = self.calls.setdefault(seat, deque())
        while calls and calls[0] <= now - RATE_WINDOW:
            calls.popleft()
        if len(calls) >= self.limit:
            return calls[0] + RATE_WINDOW - now
        calls.append(now)
        return None
