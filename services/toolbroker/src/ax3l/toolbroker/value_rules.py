"""The checks a proposal passes before the golden configuration is even read.

Exact payload fields (a protocol matter: the MCP server builds the payload; the fields are
``wire.payload_fields``), then finite JSON numbers (``wire.number_problem``: booleans, strings,
NaN and infinities are refused), then the leaf's own JSON-schema rules (range, step, integer).
Rule texts come from the schema file through ``jsonschema``.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

from ax3l.shared.config_schema import Leaf
from ax3l.shared.wire import printable
from ax3l.toolbroker.results import ProtocolFailure


def clean_name(value: Any, limit: int = 100) -> str | None:
    """``value`` if it is a short, encodable string (a name to echo or store), else None."""
    if not isinstance(value, str) or not value or len(value) > limit:
        return None
    cleaned = value.encode("utf-8", "replace").decode("utf-8")
    return cleaned if cleaned == value else None


def require_fields(payload: dict[str, Any], fields: tuple[str, ...], method: str) -> None:
    """Exactly ``fields``, no more and no fewer, else an ``invalid_request`` failure."""
    missing = [name for name in fields if name not in payload]
    extra = sorted(printable(name, 40) for name in payload if name not in fields)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(extra)}")
        raise ProtocolFailure(
            "invalid_request",
            f"{method} payload must have exactly the fields {', '.join(fields)}: "
            + "; ".join(parts),
        )


def require_name(payload: dict[str, Any], field: str, method: str) -> str:
    """The payload's parameter or pair name (a short string), else ``invalid_request``."""
    name = clean_name(payload[field])
    if name is None:
        raise ProtocolFailure(
            "invalid_request",
            f"{method} payload field {field} must be a non-empty string of at most 100"
            f" characters, got {printable(payload[field])}",
        )
    return name


_VALIDATORS: dict[tuple[str, str], Draft202012Validator] = {}


def _validator(leaf: Leaf) -> Draft202012Validator:
    key = (leaf.path, json.dumps(leaf.schema, sort_keys=True))
    if key not in _VALIDATORS:
        _VALIDATORS[key] = Draft202012Validator(leaf.schema)
    return _VALIDATORS[key]


def leaf_problems(leaf: Leaf, value: int | float) -> list[str]:
    """The leaf's schema rules that ``value`` (a finite number) breaks, as ``$.path: ...``."""
    if leaf.type == "integer" and isinstance(value, float) and not value.is_integer():
        return [f"$.{leaf.path}: {printable(value)} is not an integer"]
    return [
        f"$.{leaf.path}: {shorten(error.message)}" for error in _validator(leaf).iter_errors(value)
    ]


def shorten(text: str, limit: int = 300) -> str:
    """At most ``limit`` characters, keeping both ends (a 60,000-digit integer makes a long
    message whose rule is at the end)."""
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"
