"""Each service's settings: the sections it reads (``sections.py``), nothing more.

A service reads only its class, and the stack's definition (``stack/spec.py``) hands each
process only the variables of its class (``setting_names``). They live in shared, beside the
sections, because the stack's definition reads them and shared imports no service.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import AliasChoices, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from ax3l.shared.settings.base import Section, setting
from ax3l.shared.settings.sections import (
    AlertSettings,
    DbSettings,
    HttpSettings,
    LlmSettings,
    LoopSettings,
    McpSettings,
    PromotionSettings,
    SchemaSettings,
    SeatsSettings,
    SnakeLabSettings,
    ZmqSettings,
)

LIVE_REFRESH_CHOICES = (0, 5, 30, 60, 300)  # the pages' refresh choices (models/events.py)


class ToolbrokerSettings(DbSettings, SnakeLabSettings, ZmqSettings, HttpSettings, SchemaSettings):
    """The toolbroker: the tool channel it binds, SnakeLab it forwards to, the database it
    checks and its status API."""

    model_config = SettingsConfigDict(title="Settings")  # its errors read as before


class McpServerSettings(ZmqSettings, SchemaSettings):
    """The MCP server (a conversation's child): the broker's tool channel and the schema."""

    model_config = SettingsConfigDict(title="Settings")  # its errors read as before


class SeatsServiceSettings(DbSettings, ZmqSettings, SeatsSettings, SchemaSettings):
    """The seats' endpoint (``seat_process serve``, or the orchestrator's child): its own
    settings, its database login, the broker's tool channel and the schema."""

    model_config = SettingsConfigDict(title="Settings")  # its errors read as before


class OrchestratorSettings(
    SeatsServiceSettings,
    ToolbrokerSettings,
    McpServerSettings,
    LlmSettings,
    McpSettings,
    LoopSettings,
    PromotionSettings,
    AlertSettings,
):
    """The orchestrator: the loop and its proposers, the MCP children and the seats' endpoint
    it may start (their settings included), alerts, and the broker's timings it must fit in."""

    model_config = SettingsConfigDict(title="Settings")  # its errors read as before


class ReportsSettings(
    DbSettings, SnakeLabSettings, HttpSettings, SchemaSettings, LlmSettings, PromotionSettings
):
    """The report server: the databases (as its own read-only user), SnakeLab's and the
    orchestrator's status, the proposers' and the model's settings it shows, and its pages'."""

    # The report server only reads: it logs in as its own SELECT-only user when one is set
    # (`ax3l-db grant-reports`), else as Ax3l's user. Set both variables of the pair.
    db_user: str = setting(
        "ax3l",
        AliasChoices("AX3L_REPORTS_DB_USER", "DB_USER"),
        shown="unset (`ax3l_reports` in `make run` and compose)",
    )
    """the report server's SELECT-only database user; unset: `DB_USER`"""
    db_password: SecretStr = setting(
        SecretStr(""), AliasChoices("AX3L_REPORTS_DB_PASSWORD", "DB_PASSWORD"), shown="unset"
    )
    """its password (set both or neither)"""
    status_timeout: float = setting(1.0, "AX3L_REPORTS_STATUS_TIMEOUT", gt=0)
    """seconds the report server waits for SnakeLab before showing it unavailable"""
    status_interval: float = setting(3.0, "AX3L_REPORTS_STATUS_INTERVAL", gt=0)
    """seconds between the report server's SnakeLab status polls"""
    orchestrator_url: str | None = setting(
        None,
        "AX3L_ORCHESTRATOR_URL",
        shown="unset: built from `AX3L_HTTP_HOST` and `AX3L_ORCHESTRATOR_PORT`"
        " (`http://127.0.0.1:28871`)",
    )
    """the orchestrator's status API base URL that the report server's status bar polls (same
    timeout and interval as its SnakeLab polls)"""
    page_size: int = setting(100, "AX3L_REPORTS_PAGE_SIZE", ge=1, le=500)
    """events per event-log page (at most 500)"""
    live_refresh: int = setting(30, "AX3L_REPORTS_LIVE_REFRESH")
    """seconds between a page's in-place updates when its refresh selector was not chosen (no
    `refresh` in the URL) and the experiment runs (the orchestrator answers and has not
    stopped): 0, 5, 30, 60 or 300 (0: off). The comparison page, and a finished run's page, stay
    off unless chosen"""

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


class Settings(OrchestratorSettings):
    """Every section but the report server's and the administrator's: what the admin tools
    (``ax3l-db``, ``ax3l-seats``) and the tests' support read. A compatibility name too: the
    orchestrator reads every one of these sections, so this adds no field to its class."""


# Each service of the stack (``stack/spec.py``'s names) and the MCP server: the class it reads.
SERVICE_SETTINGS: dict[str, type[Section]] = {
    "toolbroker": ToolbrokerSettings,
    "seats": SeatsServiceSettings,
    "orchestrator": OrchestratorSettings,
    "reports": ReportsSettings,
    "mcp-snakelab": McpServerSettings,
}


@lru_cache
def get_settings() -> Settings:
    """The admin tools' settings, read once; tests override the dependency instead."""
    return Settings()


@lru_cache
def mcp_server_settings() -> McpServerSettings:
    """The MCP server's settings, read once (the zygote reads them before it forks)."""
    return McpServerSettings()
