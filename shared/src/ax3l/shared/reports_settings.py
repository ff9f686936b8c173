"""The report server's settings: Ax3l's shared ones plus how it watches SnakeLab and the
orchestrator. They live in shared, beside ``Settings``, because the stack's definition
(``stack/spec.py``) reads which variables the report server takes, and shared imports no
service; the report server reads them through ``ax3l.reports.settings``."""

from __future__ import annotations

from pydantic import AliasChoices, SecretStr, field_validator

from ax3l.shared.settings import Settings, setting

LIVE_REFRESH_CHOICES = (0, 5, 30, 60, 300)  # the pages' refresh choices (models/events.py)


class ReportsSettings(Settings):
    """Shared settings plus the report server's own (each documents its variable)."""

    # The report server only reads: it logs in as its own SELECT-only user when one is set
    # (`ax3l-db grant-reports`), else as Ax3l's user. Set both variables of the pair.
    db_user: str = setting("ax3l", AliasChoices("AX3L_REPORTS_DB_USER", "DB_USER"))
    db_password: SecretStr = setting(
        SecretStr(""), AliasChoices("AX3L_REPORTS_DB_PASSWORD", "DB_PASSWORD")
    )

    status_timeout: float = setting(1.0, "AX3L_REPORTS_STATUS_TIMEOUT", gt=0)
    """seconds to wait for SnakeLab's control socket before showing it unavailable"""
    status_interval: float = setting(3.0, "AX3L_REPORTS_STATUS_INTERVAL", gt=0)
    """seconds between SnakeLab status polls (pages show the latest poll)"""
    orchestrator_url: str | None = setting(None, "AX3L_ORCHESTRATOR_URL")
    """the orchestrator's status API base URL; unset: AX3L_HTTP_HOST and AX3L_ORCHESTRATOR_PORT
    (http://127.0.0.1:28871)"""
    page_size: int = setting(100, "AX3L_REPORTS_PAGE_SIZE", ge=1, le=500)
    """events per page"""
    live_refresh: int = setting(30, "AX3L_REPORTS_LIVE_REFRESH")
    """seconds between a page's in-place updates when its refresh is not chosen and the
    experiment runs (0, 5, 30, 60 or 300; 0: off)"""

    @field_validator("live_refresh")
    @classmethod
    def _a_refresh_choice(cls, value: int) -> int:
        if value not in LIVE_REFRESH_CHOICES:
            raise ValueError(f"must be one of {', '.join(map(str, LIVE_REFRESH_CHOICES))}")
        return value

    def orchestrator_status_url(self) -> str:
        """Where the status bar reads what the loop is doing (``/api/status``)."""
        if self.orchestrator_url:
            return self.orchestrator_url.rstrip("/") + "/api/status"
        return self.local_url(self.orchestrator_port) + "/api/status"
