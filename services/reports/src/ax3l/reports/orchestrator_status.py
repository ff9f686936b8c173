"""What the loop is doing now, read from the orchestrator's ``/api/status`` in the background.

Like the SnakeLab monitor, pages read the latest poll and never wait on the orchestrator: a
hung or stopped orchestrator shows as "unavailable since ..." instead of slowing the page.
The orchestrator's JSON is read leniently: fields it does not send (older versions have no
``failure_streak``) are simply absent from the status bar.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import httpx

from ax3l.reports.polling import BackgroundPoll

log = logging.getLogger(__name__)

OrchestratorState = Literal["up", "unavailable", "unknown"]


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class OrchestratorPoll:
    """One poll's result; ``data`` is the status JSON when the orchestrator answered."""

    state: OrchestratorState
    checked_at: datetime | None
    data: dict[str, Any] = field(default_factory=dict)
    detail: str | None = None
    unavailable_since: datetime | None = None


async def poll_orchestrator(http: httpx.AsyncClient, url: str) -> tuple[dict[str, Any] | None, str]:
    """The status JSON, or None and why not; never raises."""
    try:
        response = await http.get(url)
    except httpx.TimeoutException:
        return None, "no answer within the timeout"
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except Exception as exc:  # a malformed URL must not take the report server down
        log.warning("polling the orchestrator failed: %s", exc)
        return None, type(exc).__name__
    if response.status_code != 200:
        return None, f"HTTP {response.status_code}"
    try:
        data = response.json()
    except ValueError:
        return None, "the reply is not JSON"
    if not isinstance(data, dict):
        return None, "the reply is not a JSON object"
    return data, "ok"


class OrchestratorMonitor(BackgroundPoll[OrchestratorPoll]):
    """Polls the orchestrator every ``interval`` seconds in a task started by the lifespan."""

    task_name = "orchestrator-monitor"

    def __init__(self, url: str, timeout: float, interval: float):
        super().__init__(interval, OrchestratorPoll("unknown", None))
        self.url = url
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout))

    async def stop(self) -> None:
        await super().stop()
        await self._http.aclose()

    async def poll_once(self) -> OrchestratorPoll:
        data, detail = await poll_orchestrator(self._http, self.url)
        now = _now()
        if data is not None:
            self.latest = OrchestratorPoll("up", now, data)
        else:
            previous = self.latest
            since = previous.unavailable_since if previous.state == "unavailable" else now
            self.latest = OrchestratorPoll(
                "unavailable", now, detail=detail, unavailable_since=since
            )
        return self.latest


def epoch_time(value: Any) -> datetime | None:
    """An orchestrator timestamp (seconds since the epoch) as a stored-style UTC time."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    try:
        return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
    except (OverflowError, OSError, ValueError):
        return None
