"""The search space of an entry for the built-in proposers: legal values from the schema."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ax3l.shared.canonical import canonical_number
from ax3l.shared.config_schema import ConfigSchema, Leaf
from ax3l.shared.registry import Entry, leaf_domain

Value = int | float
Key = tuple[Fraction, ...]


@dataclass(frozen=True)
class Dimension:
    """One leaf of an entry: a finite list of values, or a continuous interval."""

    leaf: Leaf
    choices: tuple[Value, ...] | None
    low: float
    high: float

    @property
    def decimals(self) -> int:
        """Digits kept when sampling the continuous interval (about 1/1000 of its width)."""
        width = self.high - self.low
        return max(0, math.ceil(-math.log10(width / 1000))) if width > 0 else 6

    def clamp_round(self, value: float) -> Value:
        """``value`` made legal: the nearest choice, or rounded and kept inside the interval."""
        if self.choices is not None:
            return min(self.choices, key=lambda c: abs(c - value))
        rounded = round(value, self.decimals)
        return min(self.high, max(self.low, rounded))

    def sample(self, rng: random.Random) -> Value:
        if self.choices is not None:
            return rng.choice(self.choices)
        return self.clamp_round(rng.uniform(self.low, self.high))


def _as_value(leaf: Leaf, value: Fraction) -> Value:
    return int(value) if leaf.type == "integer" else float(value)


def dimensions(schema: ConfigSchema, entry: Entry) -> tuple[Dimension, ...]:
    """The entry's leaves, in value order."""
    found = []
    for path in entry.paths:
        leaf = schema.by_path[path]
        domain = leaf_domain(leaf)
        if domain is not None:
            choices = tuple(_as_value(leaf, v) for v in domain)
            found.append(Dimension(leaf, choices, float(min(choices)), float(max(choices))))
        else:
            low = leaf.minimum if leaf.minimum is not None else 0.0
            high = leaf.maximum if leaf.maximum is not None else low + 1.0
            found.append(Dimension(leaf, None, float(low), float(high)))
    return tuple(found)


def key_of(values: Sequence[Value]) -> Key:
    return tuple(canonical_number(v) for v in values)


def random_untested(
    dims: Sequence[Dimension], excluded: set[Key], rng: random.Random, tries: int = 200
) -> tuple[Value, ...] | None:
    """A random legal choice not in ``excluded``, or None when none could be found."""
    if all(d.choices is not None for d in dims):
        import itertools

        remaining = [
            combo
            for combo in itertools.product(*(d.choices or () for d in dims))
            if key_of(combo) not in excluded
        ]
        return rng.choice(remaining) if remaining else None
    for _ in range(tries):
        values = tuple(d.sample(rng) for d in dims)
        if key_of(values) not in excluded:
            return values
    return None
