"""``ax3l-compare``'s settings: where results are stored, what the orchestrators inherit (the
model server, the promotion's limits), and the login that may create the throwaway databases.

The admin login and SnakeLab's login are read here and handed on only as far as needed: the
admin login to no process at all, SnakeLab's only to the reference SnakeLab of each repeat.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import AliasChoices, SecretStr

from ax3l.shared.env_files import read_env_file, setting_names
from ax3l.shared.settings import (
    AdminLoginSettings,
    DbSettings,
    LlmSettings,
    PromotionSettings,
    SchemaSettings,
    SnakeLabSettings,
    setting,
)


class CompareSettings(
    DbSettings, SnakeLabSettings, SchemaSettings, LlmSettings, PromotionSettings, AdminLoginSettings
):
    """`ax3l-compare`'s own: the reference SnakeLab's login that each repeat's SnakeLab gets, and
    how many repeats run side by side."""

    snakelab_db_user: str = setting("snakelab", "SNAKELAB_DB_USER")
    """`ax3l-compare`: the reference SnakeLab's database user, which each repeat's SnakeLab logs
    in as (the reference SnakeLab reads it too)"""
    snakelab_db_password: SecretStr = setting(SecretStr(""), "SNAKELAB_DB_PASSWORD")
    """its password"""
    parallel: int | None = setting(
        None,
        AliasChoices("AX3L_COMPARE_PARALLEL"),
        ge=1,
        shown="unset: twice the cores; half the cores, at least 1, when a proposer uses the"
        " model server",
    )
    """`ax3l-compare`: repeats side by side (`--parallel`); a repeat on the 0 s surrogate waits on
    its services about half the time, and the model server answers one conversation at a time"""

    def default_parallel(self, uses_model: bool = False) -> int:
        if self.parallel is not None:
            return self.parallel
        cores = os.cpu_count() or 1
        return max(1, cores // 2) if uses_model else 2 * cores


def effective_env(env_file: Path | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The file's values (when given) under the process environment: what is exported wins."""
    values = read_env_file(env_file) if env_file is not None else {}
    values.update(environ)
    return values


def load_settings(env: Mapping[str, str]) -> CompareSettings:
    known = setting_names(CompareSettings)
    return CompareSettings(**{k: v for k, v in env.items() if k in known})  # type: ignore[arg-type]
