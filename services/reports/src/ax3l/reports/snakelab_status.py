"""SnakeLab's state for the status bar, polled in the background so pages never wait on it.

A page that asked SnakeLab itself would take the whole control timeout whenever SnakeLab is
down; the monitor asks every few seconds and pages read its latest answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import ValidationError

from ax3l.reports.polling import BackgroundPoll
from ax3l.shared.snakelab_client import (
    SnakeLabClient,
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
)
from ax3l.shared.wire import RunStatus

log = logging.getLogger(__name__)

SnakeLabState = Literal["idle", "running", "unavailable", "unknown"]

LABELS: dict[str, str] = {
    "idle": "SnakeLab Idle",
    "running": "Running Simulation",
    "unavailable": "Service Unavailable",
    "unknown": "Checking SnakeLab…",
}


@dataclass(frozen=True)
class SnakeLabStatus:
    """One poll's result."""

    state: SnakeLabState
    checked_at: datetime | None
    run: RunStatus | None = None
    detail: str | None = None

    @property
    def label(self) -> str:
        return LABELS[self.state]


async def poll_snakelab(client: SnakeLabClient) -> SnakeLabStatus:
    """Ask SnakeLab for its active run once; never raises."""
    now = datetime.now(UTC).replace(tzinfo=None)
    try:
        run = await client.active()
    except SnakeLabUnavailable:
        return SnakeLabStatus("unavailable", now, detail="no answer from the control socket")
    except SnakeLabError as exc:
        return SnakeLabStatus("unavailable", now, detail=f"SnakeLab error {exc.code}")
    except (SnakeLabProtocolError, ValidationError):
        return SnakeLabStatus("unavailable", now, detail="the reply broke the control contract")
    except Exception as exc:  # a broken endpoint string must not take the report server down
        log.warning("polling SnakeLab failed: %s", exc)
        return SnakeLabStatus("unavailable", now, detail=type(exc).__name__)
    if run is None:
        return SnakeLabStatus("idle", now)
    return SnakeLabStatus("running", now, run=run)


class SnakeLabMonitor(BackgroundPoll[SnakeLabStatus]):
    """Polls SnakeLab every ``interval`` seconds in a task started by the app's lifespan."""

    task_name = "snakelab-monitor"

    def __init__(self, client: SnakeLabClient, interval: float):
        super().__init__(interval, SnakeLabStatus("unknown", None))
        self.client = client

    async def poll_once(self) -> SnakeLabStatus:
        return await poll_snakelab(self.client)
