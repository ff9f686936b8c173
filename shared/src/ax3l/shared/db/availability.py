"""A database outage is a pause: when it began, what failed, and waiting it out with backoff.

Every ``Database`` keeps an ``Outage``: the first failure to reach the server opens it (logged
once), the next successful transaction closes it (logged with its length). Readiness checks
and status pages read it. A full disk on the database server is kept apart (``DiskFullSpell``):
the server still answers reads, so only a committed write ends it. ``wait_for_database``
repeats a startup step until the server answers; errors no wait can fix
(``DatabaseMisconfigured``) end the wait at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from ax3l.shared.db.errors import DatabaseUnavailable, DiskFull

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_PAUSE = 0.2  # seconds before the second attempt; doubles up to the setting's maximum
LOG_EVERY = 30.0  # seconds between repeated "still waiting" lines


def iso(timestamp: float) -> str:
    """A wall-clock time as ISO 8601 in UTC, to the second."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


@dataclass
class Outage:
    """Whether the database is unreachable right now, since when, and the latest error."""

    since: float | None = None  # wall clock (time.time) of the first failure
    error: str | None = None
    _monotonic_since: float = 0.0
    _began = "database unavailable: %s"
    _ended = "database available again after %.1f s"
    _waiting = "waiting for the database since"

    @property
    def active(self) -> bool:
        return self.since is not None

    def begin(self, error: BaseException | str) -> None:
        """Note a failure to reach the server (opens the outage the first time)."""
        self.error = str(error)
        if self.since is None:
            self.since = time.time()
            self._monotonic_since = time.monotonic()
            log.warning(self._began, self.error)

    def end(self) -> float | None:
        """Note that the server answered; returns the outage's length if one just ended."""
        if self.since is None:
            return None
        lasted = time.monotonic() - self._monotonic_since
        log.warning(self._ended, lasted)
        self.since = None
        self.error = None
        return lasted

    def describe(self) -> str | None:
        """``waiting for the database since <time>: <error>``, or None when it answers."""
        if self.since is None:
            return None
        return f"{self._waiting} {iso(self.since)}: {self.error}"

    def as_dict(self) -> dict[str, object]:
        return {
            "available": self.since is None,
            "waiting_since": iso(self.since) if self.since is not None else None,
            "error": self.error,
            "message": self.describe(),
        }


class DiskFullSpell(Outage):
    """Whether the database server's disk is full: a write failed for want of space (opens
    it), and no write has committed since (one closes it). ``describe`` reads "disk full
    since <time>: <error>"."""

    _began = "database disk full: %s"
    _ended = "database disk has space again: a write committed after %.1f s"
    _waiting = "disk full since"


async def wait_for_database(
    attempt: Callable[[], Awaitable[T]],
    outage: Outage,
    *,
    pause_max: float,
    what: str = "the database",
) -> T:
    """``attempt()`` until it stops raising ``DatabaseUnavailable``, pausing with backoff.

    Any other error (``DatabaseMisconfigured``, a plain ``DatabaseError``) propagates: waiting
    cannot fix it. The outage is opened on the first failure and closed on success (a full disk
    is waited out too, but it is no outage: the server answers, and the database's
    ``disk_full`` says it).

    A loop of its own on purpose: tenacity's ``AsyncRetrying`` with ``wait_exponential`` (the
    orchestrator's step retries use it) costs 37 us a retry against this loop's 3.5 us
    (``bench/bench_retries.py``, pauses at zero).
    """
    pause = min(FIRST_PAUSE, pause_max)
    logged = 0.0
    while True:
        try:
            result = await attempt()
        except DatabaseUnavailable as exc:
            if not isinstance(exc, DiskFull):
                outage.begin(exc)
            if time.monotonic() - logged > LOG_EVERY:
                log.warning("waiting for %s (%s); retrying with backoff", what, exc)
                logged = time.monotonic()
            await asyncio.sleep(pause)
            pause = min(pause * 2, pause_max)
            continue
        outage.end()
        return result
