"""Ax3l's settings, read from the environment (and ``.env`` files when asked): the sections
(``sections.py``), each service's class composed of them (``services.py``), and how a field names
its variable (``base.py``). docs/settings.md is generated from them (``make settings-doc``)."""

from ax3l.shared.settings.base import FileVariables, Section, read_value_file, setting
from ax3l.shared.settings.sections import (
    DEFAULT_ALLOWED_HOSTS,
    LLM_PROPOSERS,
    PROPOSER_NAMES,
    AdminLoginSettings,
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
from ax3l.shared.settings.services import (
    LIVE_REFRESH_CHOICES,
    McpServerSettings,
    OrchestratorSettings,
    ReportsSettings,
    SeatsServiceSettings,
    Settings,
    ToolbrokerSettings,
    get_settings,
    mcp_server_settings,
)

__all__ = [
    "DEFAULT_ALLOWED_HOSTS",
    "LIVE_REFRESH_CHOICES",
    "LLM_PROPOSERS",
    "PROPOSER_NAMES",
    "AdminLoginSettings",
    "AlertSettings",
    "DbSettings",
    "FileVariables",
    "HttpSettings",
    "LlmSettings",
    "LoopSettings",
    "McpServerSettings",
    "McpSettings",
    "OrchestratorSettings",
    "PromotionSettings",
    "ReportsSettings",
    "SchemaSettings",
    "SeatsServiceSettings",
    "SeatsSettings",
    "Section",
    "Settings",
    "SnakeLabSettings",
    "ToolbrokerSettings",
    "ZmqSettings",
    "get_settings",
    "mcp_server_settings",
    "read_value_file",
    "setting",
]
