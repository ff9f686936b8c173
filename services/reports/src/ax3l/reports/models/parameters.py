"""What query-string parameter models share: unknown keys are ignored, blank means unset."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


class QueryModel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        # HTML forms send "All" choices as empty strings.
        return None if value == "" else value
