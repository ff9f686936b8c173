"""The settings classes' common parts: how a field names its variable, and the sources every
class reads (the environment, then ``<NAME>_FILE``, then the defaults' other sources)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, JsonValue
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)


def setting(default: Any, variable: str | AliasChoices, shown: str = "", **limits: Any) -> Any:
    """A field read from the environment variable ``variable`` (or any of its choices), with
    its default and its limits (``ge``, ``gt``, ``le``, ``pattern``); the string under the field
    is its description, and ``shown`` what docs/settings.md shows as its default when the
    value alone does not say it (``unset: the bundled copy``)."""
    extra: dict[str, JsonValue] | None = {"shown": shown} if shown else None
    return Field(default, validation_alias=variable, json_schema_extra=extra, **limits)


def read_value_file(variable: str, path: str) -> str:
    """The value in the file ``path`` named by ``<variable>_FILE``, without its trailing
    newline; an unreadable file is a clear error naming the variable."""
    try:
        return Path(path).read_text().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{variable}_FILE={path}: cannot read it ({exc})") from None


def variable_names(field: FieldInfo) -> list[str]:
    """The environment variables of a field, in the order they are tried."""
    alias = field.validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
    return [choice for choice in choices if isinstance(choice, str)]


class FileVariables(PydanticBaseSettingsSource):
    """``<NAME>_FILE`` for every variable ``NAME`` that is not set itself: the file's contents."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str] | None = None):
        super().__init__(settings_cls)
        self.env = os.environ if env is None else env

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every field at once

    def __call__(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for field in self.settings_cls.model_fields.values():
            for name in variable_names(field):
                path = self.env.get(f"{name}_FILE")
                if path and name not in self.env:
                    found[name] = read_value_file(name, path)
        return found


class Section(BaseSettings):
    """A group of settings (``sections.py``); a service's class (``services.py``) is the sections
    it reads. Each field documents its environment variable."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The environment, then ``<NAME>_FILE`` variables, then the defaults' other sources."""
        return (
            init_settings,
            env_settings,
            FileVariables(settings_cls),
            dotenv_settings,
            file_secret_settings,
        )

    model_config = SettingsConfigDict(
        extra="ignore", populate_by_name=True, use_attribute_docstrings=True
    )
