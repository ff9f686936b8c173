"""What the hybrids showed their LLM of the classical proposer, and whether the LLM followed it.

On an LLM turn of ``llm+tpe`` the orchestrator sends a ``prompt_sent`` event whose
``source_name`` is ``TpeAdvice`` (``ax3l.orchestrator.proposers.hybrid.advice_prompt``): prose,
then a ```json block whose ``"suggestions"`` is a list of ``{schema path: value}``. Under
``llm+model`` it is ``ModelAdvice`` (``proposers/model_advice.py``), whose line ``Its
suggestion: {schema path: value} (...`` holds the model proposer's one suggestion. A proposal
matched when its ``changes`` hold every key of one suggestion with the same value (numbers
compared as numbers, floats with ``math.isclose``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

ADVICE_SOURCE = "TpeAdvice"
MODEL_ADVICE_SOURCE = "ModelAdvice"
_JSON_BLOCK = re.compile(r"```json\s*\n(.*?)\n```", re.DOTALL)
_SUGGESTION = re.compile(r"^Its suggestion: (\{[^\n]*?\}) \(", re.MULTILINE)


def model_advice_suggestions(text: str) -> list[dict[str, Any]]:
    """The model proposer's suggestion in a ModelAdvice prompt's text (a list of one), or []."""
    found = _SUGGESTION.search(text)
    if found is None:
        return []
    try:
        suggestion = json.loads(found.group(1))
    except ValueError:
        return []
    return [suggestion] if isinstance(suggestion, dict) and suggestion else []


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
