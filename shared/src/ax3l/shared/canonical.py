"""Canonical equality and fingerprints of configurations over SnakeLab's 26 columns.

Two configurations are the same run setting when every column holds the same number, however
it was written: ``1970 == 1970.0``, ``0.003 == 3e-3``, ``0.1 == 0.10``. Floats are read as
the shortest decimal that round-trips (what JSON and MySQL print), then compared exactly as
fractions, so no tolerance can make two different settings equal.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from ax3l.shared.config_schema import ConfigSchema


def canonical_number(value: Any) -> Fraction:
    """The exact value of a JSON/SQL number; refuses booleans, strings and non-finite floats."""
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is a boolean, not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number")
        return Fraction(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value!r} is not a finite number")
        return Fraction(value)
    raise TypeError(f"{value!r} is not a number")


def number_text(value: Any) -> str:
    """A canonical text for a number: ``64``, ``0.1``, ``-2`` (equal numbers, equal text)."""
    exact = canonical_number(value)
    if exact.denominator == 1:
        return str(exact.numerator)
    return f"{exact.numerator}/{exact.denominator}"


def canonical_columns(
    schema: ConfigSchema, config_or_flat: Mapping[str, Any], columns: Iterable[str] | None = None
) -> tuple[Fraction, ...]:
    """The exact values of ``columns`` (default: all 26), from a nested or a flat config."""
    flat = _as_flat(schema, config_or_flat)
    names = schema.columns if columns is None else tuple(columns)
    return tuple(canonical_number(flat[name]) for name in names)


def configs_equal(schema: ConfigSchema, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """True when every one of the schema's columns holds the same number in both."""
    return canonical_columns(schema, a) == canonical_columns(schema, b)


def fingerprint(
    schema: ConfigSchema, config_or_flat: Mapping[str, Any], columns: Iterable[str] | None = None
) -> str:
    """SHA-256 hex of the canonical ``columns`` (default: all): equal iff the values are equal."""
    flat = _as_flat(schema, config_or_flat)
    names = schema.columns if columns is None else tuple(columns)
    text = ";".join(f"{name}={number_text(flat[name])}" for name in names)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _as_flat(schema: ConfigSchema, config_or_flat: Mapping[str, Any]) -> Mapping[str, Any]:
    if all(column in config_or_flat for column in schema.columns):
        return config_or_flat
    flat: dict[str, Any] = {}
    for leaf in schema.leaves:
        node: Any = config_or_flat
        for part in leaf.path.split("."):
            node = node[part]
        flat[leaf.column] = node
    return flat
