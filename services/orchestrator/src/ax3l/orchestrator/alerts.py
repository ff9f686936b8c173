"""The orchestrator's alerts (``AX3L_NOTIFY_URLS``): a new golden, a seed rotation, a stall,
and the loop stopping; each sent at most once through ``ax3l.shared.alerts``.

A watcher task reads the events every ``AX3L_ALERT_POLL_INTERVAL`` seconds: each new
``golden_config_created`` (seeding or promotion; a rotation's fresh baseline is the rotation's
news) and ``golden_config_seed_incremented`` is an alert keyed by its event id. It starts after
the newest ``alert_sent`` event, so after a restart it looks again at what came since the last
alert (the keys keep those already sent from going out twice), and on a first start with alerts
it starts at the newest event (an old history raises no alerts).

Events of one look go out as one message (``burst_alert``: three goldens within a second are one
alert, not three), and a look whose newest event is younger than ``BURST_SECONDS`` waits for the
next look (once), so that a burst under way is not cut in two.

A stall is no SnakeLab run completing for ``AX3L_STALL_FACTOR`` times the median run time (of
the last 101 completed runs, from SnakeLab's ``started_at`` and ``completed_at``, UTC as
SnakeLab writes them), and never less than ``MIN_STALL_SECONDS`` (a minute: with runs of a second
or less, as on a surrogate, the loop's own work between two runs would otherwise read as a
stall), keyed by the last completed run: one alert per stall. It is counted from
the process's start at most, so a restart after days away does not raise one at once, and not
while the loop waits for a proposal (``waiting``: a conversation under way, such as a turn open
to the seats until ``AX3L_EXTERNAL_DEADLINE``) nor from before that wait ended: a turn that
waits for a seat is no stall.

Each alert has a severity (a new golden ``success``, a seed rotation ``info``, a stall
``warning``, the loop stopping ``failure``) and links to its page of the report server (a
golden's run, the high scores, the dashboard, the event log).

The loop stopping (a fatal error or a signal) is keyed by the process id, so each process says
it once; it is sent even when the database is what stopped the loop (unlogged then).
"""

from __future__ import annotations

import asyncio
import logging
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from ax3l.shared.alerts import SEVERITIES, Alert, Alerts
from ax3l.shared.db import event_reads
from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.event_reads import StoredEvent
from ax3l.shared.db.intents import now
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import GoldenConfigCreated, GoldenConfigSeedIncremented

logger = logging.getLogger(__name__)

WATCHED = (GoldenConfigCreated.event, GoldenConfigSeedIncremented.event)
MEDIAN_OF = 101  # the latest completed runs whose median run time a stall is measured against
STOP_ALERT_TIMEOUT = 20.0  # seconds the loop-stopped alert may hold up the shutdown
MIN_STALL_SECONDS = 60.0  # no stall is shorter, however short the runs
BURST_SECONDS = 10.0  # a look whose newest event is younger waits once for the rest of a burst


def _age(event: StoredEvent[Any]) -> float:
    """Seconds since the event occurred (its ``occurred_at``: the writer's UTC clock)."""
    return (now() - event.occurred_at).total_seconds() if event.occurred_at else math.inf


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


def golden_alert(event_id: int, content: Any) -> Alert | None:
    """The alert of a ``golden_config_created`` content, None for a rotation's baseline."""
    golden = GoldenConfigCreated.from_stored(content)
    if golden.kind == "seed_rotation":
        return None
    score, seed = golden.get("high_score"), golden.get("seed")
    if golden.kind == "seeding":
        title = f"Ax3l: first golden configuration, high score {score}"
    else:
        was = golden.get("previous_high_score")
        title = f"Ax3l: new golden configuration, high score {score}" + (
            f" (was {was})" if was is not None else ""
        )
    lines = [f"run {golden.get('run_id')}, seed {seed}"]
    if golden.get("parameter"):
        lines.append(f"parameter {golden.get('parameter')}")
    if golden.get("proposer"):
        lines.append(f"proposed by {golden.get('proposer')}")
    if golden.get("reason"):
        lines.append(str(golden.get("reason"))[:500])
    link = (
        f"/simulations/{golden.get('run_id')}" if golden.get("run_id") else "/golden-configurations"
    )
    return Alert(
        f"golden:{event_id}",
        "new_golden",
        title,
        "\n".join(lines),
        event_id,
        severity="success",
        link=link,
    )


def rotation_alert(event_id: int, content: Any) -> Alert:
    """The alert of a ``golden_config_seed_incremented`` content."""
    step = GoldenConfigSeedIncremented.from_stored(content)
    seed, previous = step.get("seed"), step.get("previous_seed")
    return Alert(
        f"seed_rotation:{event_id}",
        "seed_rotation",
        f"Ax3l: seed rotated to {seed}",
        f"The golden configuration (run {step.get('golden_run_id')}) runs again on seed {seed}"
        f" (was {previous}) for a fresh baseline.",
        event_id,
        severity="info",
        link="/experiment-highscores",
    )


def burst_alert(alerts: Sequence[Alert], goldens: Sequence[GoldenConfigCreated] = ()) -> Alert:
    """One message for the alerts of one look (``goldens``: the contents of its new-golden
    alerts, in order): their news in the title, each one's title and body in the body, the
    most urgent severity, one link (the goldens' page, else the high scores)."""
    if len(alerts) == 1:
        return alerts[0]
    news = [alert.title.removeprefix("Ax3l: ") for alert in alerts if alert.kind != "new_golden"]
    if len(goldens) > 1:
        was = goldens[0].get("previous_high_score")
        news.insert(
            0,
            f"{len(goldens)} new golden configurations, high score"
            f" {goldens[-1].get('high_score')}" + (f" (was {was})" if was is not None else ""),
        )
    elif goldens:
        news.insert(0, next(a for a in alerts if a.kind == "new_golden").title[len("Ax3l: ") :])
    links = {alert.link for alert in alerts}
    link = (
        links.pop()
        if len(links) == 1
        else "/golden-configurations"
        if len(goldens) == len(alerts)
        else "/experiment-highscores"
    )
    return Alert(
        f"burst:{alerts[0].key}..{alerts[-1].key}",
        "burst",
        "Ax3l: " + "; ".join(news),
        "\n\n".join(f"{alert.title.removeprefix('Ax3l: ')}\n{alert.body}" for alert in alerts),
        alerts[-1].cause_event_id,
        severity=max((alert.severity for alert in alerts), key=SEVERITIES.index),
        link=link,
    )


class AlertWatcher:
    """Looks for events and stalls to alert on; says when the loop stops."""

    def __init__(
        self,
        alerts: Alerts,
        db: Database,
        process_id: str,
        poll_interval: float,
        stall_factor: float,
        waiting: Callable[[], bool] = lambda: False,
        burst_seconds: float = BURST_SECONDS,
    ):
        """``waiting``: whether the loop waits for a proposal now (no stall meanwhile)."""
        self.alerts, self.db, self.process_id = alerts, db, process_id
        self.poll_interval, self.stall_factor = poll_interval, stall_factor
        self.waiting, self.burst_seconds = waiting, burst_seconds
        self.after: int | None = None
        self.started = time.monotonic()  # a stall counts from this process's start at most
        self.waited_until = self.started  # ... and from the end of the last wait for a proposal
        self.held = False  # the last look waited for the rest of a burst

    async def _start_point(self) -> int:
        doing = "finding where alerts start"
        claimed = await event_reads.newest_id(self.db, "alert_sent", doing=doing)
        return claimed or await event_reads.newest_id(self.db, doing=doing) or 0

    async def poll(self) -> None:
        """One look: the watched events since the last one, then a stall."""
        if self.after is None:
            self.after = await self._start_point()
        events = await event_reads.select(
            self.db, WATCHED, after=self.after, oldest=200, doing="reading events to alert on"
        )
        young = bool(events) and _age(events[-1]) < self.burst_seconds
        if young and not self.held and len(events) < 200:
            self.held = True  # a burst may be under way: the next look takes all of it
        elif events:
            self.held = False
            found: list[Alert] = []
            goldens: list[GoldenConfigCreated] = []
            for event in events:
                alert, golden = self._alert(event)
                if alert is not None:
                    found.append(alert)
                    goldens += [golden] if golden is not None else []
            if found:
                await self.alerts.send_once(burst_alert(found, goldens))
            self.after = events[-1].event_id
        stall = await self.stall()
        if stall is not None:
            await self.alerts.send_once(stall)

    @staticmethod
    def _alert(event: StoredEvent[Any]) -> tuple[Alert | None, GoldenConfigCreated | None]:
        """A watched event's alert, and for a new golden its content."""
        if event.name == GoldenConfigCreated.event:
            alert = golden_alert(event.event_id, event.content)
            return alert, GoldenConfigCreated.from_stored(event.content) if alert else None
        return rotation_alert(event.event_id, event.content), None

    async def stall(self) -> Alert | None:
        """The stall alert when no run has completed for too long, else None (never while the
        loop waits for a proposal, nor counting that wait)."""
        now = time.monotonic()
        if self.waiting():
            self.waited_until = now
            return None
        runs = await SnakeLabRuns(self.db).durations(MEDIAN_OF)
        if not runs:
            return None
        median = statistics.median(max(0, took) for _, took, _ in runs) / 1e6
        last_run, _, since = min(runs, key=lambda run: run[2])
        idle = min(since / 1e6, now - self.started, now - self.waited_until)
        if idle < max(self.stall_factor * median, MIN_STALL_SECONDS):
            return None
        return Alert(
            f"stall:{last_run}",
            "stall",
            f"Ax3l: no run has completed for {_minutes(idle)}",
            f"The median run takes {_minutes(median)}; nothing completed for"
            f" {self.stall_factor:g} times that (and at least {MIN_STALL_SECONDS:g} s)."
            f" The last completed run is {last_run}.",
            severity="warning",
            link="/",
        )

    async def run(self) -> None:
        """Poll until cancelled; a database error skips one look."""
        while True:
            try:
                await self.poll()
            except DatabaseError as exc:
                logger.warning("alerts: %s", exc)
            except Exception:
                # A notification service's surprise must not end the process.
                logger.exception("alerts: a look failed")
            await asyncio.sleep(self.poll_interval)

    async def loop_stopped(self, reason: str) -> None:
        """Say, once for this process, that the loop stopped and why."""
        alert = Alert(
            f"loop_stopped:{self.process_id}",
            "loop_stopped",
            "Ax3l: the experiment loop stopped",
            reason[:1000],
            severity="failure",
            link="/events",
        )
        try:
            async with asyncio.timeout(STOP_ALERT_TIMEOUT):
                await self.alerts.send_once(alert, unlogged_ok=True)
        except Exception:
            logger.exception("alerts: could not say that the loop stopped")
