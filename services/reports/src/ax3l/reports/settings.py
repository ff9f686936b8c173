"""The report server's settings (the class lives in ``ax3l.shared.settings``, where the stack's
definition reads its variables) and the process's one instance."""

from __future__ import annotations

from functools import lru_cache

from ax3l.shared.settings import LIVE_REFRESH_CHOICES, ReportsSettings

__all__ = ["LIVE_REFRESH_CHOICES", "ReportsSettings", "get_settings"]


@lru_cache
def get_settings() -> ReportsSettings:
    """The process's settings, read once; tests override the dependency or pass their own."""
    return ReportsSettings()
