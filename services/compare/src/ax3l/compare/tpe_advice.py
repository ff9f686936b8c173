"""What the hybrid ``llm+tpe`` showed its model of TPE, and whether the model followed it.

On a model turn the orchestrator sends a ``prompt_sent`` event whose ``source_name`` is
``TpeAdvice`` (``ax3l.orchestrator.proposers.hybrid.advice_prompt``): prose, then a ```json
block whose ``"suggestions"`` is a list of ``{schema path: value}``. A model proposal matched
TPE when its ``changes`` hold every key of one suggestion with the same value (numbers compared
as numbers, floats with ``math.isclose``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

ADVICE_SOURCE = "TpeAdvice"
_JSON_BLOCK = re.compile(r"```json\s*\n(.*?)\n```", re.DOTALL)


def advice_suggestions(text: str) -> list[dict[str, Any]]:
    """TPE's suggestions in an advice prompt's text; empty when it holds no readable list."""
    found = _JSON_BLOCK.search(text)
    if found is None:
        return []
    try:
        state = json.loads(found.group(1))
    except ValueError:
        return []
    suggestions = state.get("suggestions") if isinstance(state, dict) else None
    if not isinstance(suggestions, list):
        return []
    return [s for s in suggestions if isinstance(s, dict) and s]


def same_value(proposed: Any, suggested: Any) -> bool:
    """Equal as numbers (integers exactly, floats within ``math.isclose``), else by ``==``."""
    if _is_number(proposed) and _is_number(suggested):
        if isinstance(proposed, int) and isinstance(suggested, int):
            return proposed == suggested
        return math.isclose(proposed, suggested)
    return bool(proposed == suggested)


def matches_a_suggestion(
    changes: Mapping[str, Any], suggestions: Sequence[Mapping[str, Any]]
) -> bool:
    """Whether ``changes`` equal one of ``suggestions`` on that suggestion's keys."""
    return any(
        all(key in changes and same_value(changes[key], value) for key, value in s.items())
        for s in suggestions
        if s
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
