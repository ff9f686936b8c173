"""Alerts: notifications through apprise (``AX3L_NOTIFY_URLS``), each sent at most once.

An alert has a ``key`` that names what it is about (``golden:<event id>``,
``loop_stopped:<process id>``...). Sending one is, in this order:

1. look for an ``alert_sent`` event of that key (its ``process_id`` is a uuid5 of the key, so
   the events' ``(process_id, event_id)`` index finds it); found: it went out before, stop;
2. write the ``alert_sent`` event (the claim);
3. send it through apprise; a send that did not reach every service is an ``alert_failed``
   event (WARNING) under the claim, and is not tried again.

The claim is written *before* the send, so a crash between the two loses that one alert and a
restart never repeats one: at most once, because a phone that buzzes twice for one golden is
what the issue asked to avoid, and every alert is also in the event log. (Writing after the send
would be at least once: a crash between send and write repeats the alert at the restart.)

Each alert has a severity, apprise's notification type (``info``, ``success``, ``warning``,
``failure``: a webhook's ``type``, a phone app's colour), and may name the report page it is
about (``link``, a path): the message ends with that page's address under ``AX3L_REPORTS_URL``
(``AlertSettings.reports_link``), and the claim records both.

Each kind of alert has one sender (the orchestrator: goldens, seed rotations, stalls, its own
stop; ``make run``'s supervisor: a service it gave up on), so the look-up and the claim need no
lock. When the database cannot be written (the loop stopped *because* of it, or the supervisor
gave up on MariaDB), an alert whose key cannot come again (a process's stop) is still sent,
unlogged; the others wait for the database.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import warnings
from dataclasses import dataclass
from typing import Any

from ax3l.shared.db import event_reads
from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import AlertFailed, AlertSent
from ax3l.shared.settings import AlertSettings, OrchestratorSettings

logger = logging.getLogger(__name__)

# Keys become the claim's process_id through this namespace (any fixed uuid serves).
_KEY_NAMESPACE = uuid.UUID("6d1e3c2a-8f4b-4a57-9a0e-5a1e27a1e275")
SEND_TIMEOUT = 15.0  # seconds for one alert to all services


class NotifyUrlsInvalid(ValueError):
    """``AX3L_NOTIFY_URLS`` holds something apprise does not take."""


# apprise's notification types, least to most urgent.
SEVERITIES = ("info", "success", "warning", "failure")


@dataclass(frozen=True)
class Alert:
    """One notification: what it is about (``key``), its kind, title and body, the event
    that caused it (the claim's parent), its severity (``SEVERITIES``) and the path of the
    report page it is about."""

    key: str
    kind: str
    title: str
    body: str
    cause_event_id: int | None = None
    severity: str = "info"
    link: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"alert severity {self.severity!r} is none of {', '.join(SEVERITIES)}")
        if self.link is not None and not self.link.startswith("/"):
            raise ValueError(f"an alert's link is a report page's path, not {self.link!r}")


def claim_id(key: str) -> str:
    """The ``process_id`` of the ``alert_sent`` event of ``key``."""
    return str(uuid.uuid5(_KEY_NAMESPACE, key))


class Notifier:
    """Apprise with the configured URLs; ``send`` reports whether every service took it."""

    def __init__(self, urls: str):
        with warnings.catch_warnings():
            # apprise's plugins, loaded on first use, import imghdr (deprecated in 3.11).
            warnings.filterwarnings("ignore", "'imghdr' is deprecated", DeprecationWarning)
            import apprise

            self._apprise = apprise.Apprise()
            added = bool(urls.strip()) and self._apprise.add(urls)
        if not added:
            # The URLs hold tokens: the message names none of them.
            raise NotifyUrlsInvalid(
                "AX3L_NOTIFY_URLS has an entry apprise does not know (see"
                " https://github.com/caronc/apprise/wiki for the URL of each service)"
            )
        self.services = len(self._apprise)

    def send(self, title: str, body: str, severity: str = "info") -> bool:
        return bool(
            self._apprise.notify(body=body, title=title, notify_type=severity, timeout=SEND_TIMEOUT)
        )


def notifier_from(settings: AlertSettings) -> Notifier | None:
    """The notifier of ``AX3L_NOTIFY_URLS``, None when unset or blank (an empty secret file:
    no alerts); raises ``NotifyUrlsInvalid``."""
    if settings.notify_urls is None or not settings.notify_urls.get_secret_value().strip():
        return None
    return Notifier(settings.notify_urls.get_secret_value())


class Alerts:
    """Sends alerts at most once, each logged as an event (see the module docstring)."""

    def __init__(
        self, db: Database, log: EventLog, notifier: Notifier, reports_url: str | None = None
    ):
        """``reports_url``: the report server's base URL the alerts' links start with."""
        self.db, self.log, self.notifier = db, log, notifier
        self.reports_url = (reports_url or "").rstrip("/") or None

    def link(self, alert: Alert) -> str | None:
        """The address of the page ``alert`` is about, when it names one and the report
        server's URL is known."""
        if alert.link is None or self.reports_url is None:
            return None
        return self.reports_url + alert.link

    async def already_sent(self, key: str) -> bool:
        return await event_reads.latest(self.db, AlertSent, process_id=claim_id(key)) is not None

    async def send_once(self, alert: Alert, *, unlogged_ok: bool = False) -> bool:
        """Claim and send ``alert`` unless it was claimed before; True when it was sent now.

        ``unlogged_ok``: the key can never come again, so when the database cannot be read or
        written the alert is sent without its events rather than lost.
        """
        link = self.link(alert)
        body = f"{alert.body}\n{link}" if link else alert.body
        named = {"link": link} if link else {}
        try:
            if await self.already_sent(alert.key):
                return False
            claim: int | None = await self.log.log(
                AlertSent(
                    key=alert.key,
                    kind=alert.kind,
                    title=alert.title,
                    body=body,
                    services=self.notifier.services,
                    severity=alert.severity,
                    **named,
                ),
                process_id=claim_id(alert.key),
                parent_event_id=alert.cause_event_id,
                level="WARNING" if alert.severity in ("warning", "failure") else None,
            )
        except DatabaseError as exc:
            if not unlogged_ok:
                raise
            logger.warning("alert %s sent without its event: %s", alert.key, exc)
            claim = None
        ok = await asyncio.to_thread(self.notifier.send, alert.title, body, alert.severity)
        if not ok:
            logger.warning("alert %s did not reach every notification service", alert.key)
            if claim is not None:
                await self._log_failure(alert, claim)
        return True

    async def _log_failure(self, alert: Alert, claim: int) -> None:
        try:
            await self.log.log(
                AlertFailed(
                    key=alert.key,
                    kind=alert.kind,
                    reason="not every notification service accepted it (see the log)",
                ),
                process_id=claim_id(alert.key),
                parent_event_id=claim,
            )
        except DatabaseError as exc:
            logger.warning("could not log the failed alert %s: %s", alert.key, exc)


def send_once_blocking(
    settings: OrchestratorSettings, alert: Alert, *, unlogged_ok: bool = False
) -> Any:
    """``Alerts.send_once`` from synchronous code (``make run``'s supervisor) on a database
    connection of its own; None when no notification URLs are set."""
    notifier = notifier_from(settings)
    if notifier is None:
        return None

    async def send() -> bool:
        db = Database(settings)
        try:
            return await Alerts(db, EventLog(db), notifier, settings.reports_link()).send_once(
                alert, unlogged_ok=unlogged_ok
            )
        finally:
            await db.close()

    return asyncio.run(send())
