"""A quick "certainly valid" check for configs, compiled from the schema; jsonschema decides.

Validating a config with jsonschema costs a few hundred microseconds, and SnakeLab and the
toolbroker validate every submission. Almost every config they see is valid, so a plain
Python check of the keywords this schema uses answers first: when it says a config is valid,
jsonschema would say so too, and the full validation (with its messages) is skipped. When it
says anything else, or the schema uses a keyword it does not know, jsonschema runs as before.

The check only ever answers "valid" where JSON Schema 2020-12 does; it may answer "not sure"
more often (a number that is neither ``int`` nor ``float``, an overflowing ``multipleOf``),
which costs nothing but the fallback.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

# Keywords that never affect validity.
ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _is_integer(value: Any) -> bool:
    return type(value) is int or (type(value) is float and value.is_integer())


def _skipped_by_numeric_keywords(value: Any) -> bool:
    # JSON Schema applies minimum, multipleOf... to numbers only (a bool is not one). Other
    # numeric types (Decimal, numpy) are numbers to jsonschema: "not sure" for those.
    return isinstance(value, bool) or not isinstance(value, numbers.Number)


def compile_schema(node: Any) -> Check | None:
    """A function telling whether an instance is certainly valid, or None for this schema.

    None means the schema uses something this check does not model: every config then goes
    to jsonschema.
    """
    if not isinstance(node, dict):
        return None
    checks: list[Check] = []
    for key, value in node.items():
        if key in ANNOTATIONS or key.startswith("x-"):
            continue
        check = _keyword(key, value, node)
        if check is None:
            return None
        checks.append(check)

    def valid(instance: Any) -> bool:
        return all(check(instance) for check in checks)

    return valid


def _keyword(key: str, value: Any, node: dict[str, Any]) -> Check | None:
    compiler = _KEYWORDS.get(key)
    return None if compiler is None else compiler(key, value, node)


def _properties_keyword(_key: str, value: Any, _node: dict[str, Any]) -> Check | None:
    if not isinstance(value, dict):
        return None
    compiled = {name: compile_schema(sub) for name, sub in value.items()}
    items = tuple((name, sub) for name, sub in compiled.items() if sub is not None)
    if len(items) != len(compiled):
        return None

    def check(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return True
        return all(name not in instance or sub(instance[name]) for name, sub in items)

    return check


def _required_keyword(_key: str, value: Any, _node: dict[str, Any]) -> Check | None:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        return None
    names = tuple(value)
    return lambda instance: not isinstance(instance, dict) or all(n in instance for n in names)


def _additional_keyword(_key: str, value: Any, node: dict[str, Any]) -> Check | None:
    if value is True:
        return lambda instance: True
    if value is not False or "patternProperties" in node:
        return None
    allowed = frozenset(node.get("properties", {}))
    return lambda instance: not isinstance(instance, dict) or allowed.issuperset(instance)


_COMPARE = {
    "minimum": operator.le,
    "maximum": operator.ge,
    "exclusiveMinimum": operator.lt,
    "exclusiveMaximum": operator.gt,
}


def _bound_keyword(key: str, bound: Any, _node: dict[str, Any]) -> Check | None:
    if not _is_number(bound) or not math.isfinite(bound):
        return None
    compare = _COMPARE[key]

    def check(instance: Any) -> bool:
        if _is_number(instance):
            return bool(compare(bound, instance))
        return _skipped_by_numeric_keywords(instance)

    return check


def _multiple_keyword(_key: str, divisor: Any, _node: dict[str, Any]) -> Check | None:
    if not _is_number(divisor) or not math.isfinite(divisor) or divisor <= 0:
        return None

    # The same arithmetic as jsonschema's multipleOf; "not sure" where it would need fractions.
    def check(instance: Any) -> bool:
        if not _is_number(instance):
            return _skipped_by_numeric_keywords(instance)
        if type(divisor) is float:
            quotient = instance / divisor
            return math.isfinite(quotient) and int(quotient) == quotient
        return bool(instance % divisor == 0)

    return check


def _const_keyword(_key: str, value: Any, _node: dict[str, Any]) -> Check | None:
    if not _is_number(value):
        return None
    return lambda instance: _is_number(instance) and instance == value


def _enum_keyword(_key: str, value: Any, _node: dict[str, Any]) -> Check | None:
    if not isinstance(value, list) or not all(_is_number(item) for item in value):
        return None
    choices = tuple(value)
    return lambda instance: _is_number(instance) and any(instance == c for c in choices)


_TYPES: dict[str, Check] = {
    "object": lambda instance: isinstance(instance, dict),
    "integer": _is_integer,
    "number": _is_number,
}

# Each keyword the fast path compiles; any other keyword (None) sends the schema to jsonschema.
_KEYWORDS: dict[str, Callable[[str, Any, dict[str, Any]], Check | None]] = {
    "type": lambda _key, kind, _node: _TYPES.get(kind) if isinstance(kind, str) else None,
    "properties": _properties_keyword,
    "required": _required_keyword,
    "additionalProperties": _additional_keyword,
    "minimum": _bound_keyword,
    "maximum": _bound_keyword,
    "exclusiveMinimum": _bound_keyword,
    "exclusiveMaximum": _bound_keyword,
    "multipleOf": _multiple_keyword,
    "const": _const_keyword,
    "enum": _enum_keyword,
}
