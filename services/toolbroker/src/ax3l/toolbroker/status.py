"""Counters for ``/api/status``: requests handled, counts by outcome, last request time."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

OUTCOMES = (
    "accepted",
    "rejected_invalid_value",
    "rejected_duplicate_config",
    "invalid_request",
    "unknown_method",
    "handler_error",
    "refused_turn",
)


@dataclass
class BrokerStatus:
    """In-memory since the process started (the event log is the durable record)."""

    endpoint: str = ""
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    requests_handled: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    last_request_at: datetime | None = None
    last_outcome: str | None = None

    def record(self, outcome: str) -> None:
        self.requests_handled += 1
        self.outcomes[outcome] += 1
        self.last_request_at = datetime.now(UTC)
        self.last_outcome = outcome

    def snapshot(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "started_at": self.started_at.isoformat(),
            "requests_handled": self.requests_handled,
            "outcomes": {name: self.outcomes.get(name, 0) for name in OUTCOMES},
            "last_request_at": self.last_request_at.isoformat() if self.last_request_at else None,
            "last_outcome": self.last_outcome,
        }
