"""Synthetic comparable histories: many runs of one entry spread over past seeds, with values
drawn from the schema's ranges, for the prompt-budget tests and the LLM bench.

A history of 10,000 or 100,000 runs cannot come from SnakeLab in a test; this builds the same
``ComparableHistory`` the orchestrator loads, without the database.
"""

from __future__ import annotations

import math
import random
import uuid

from ax3l.orchestrator.comparable_history import ComparableHistory, HistoryRun
from ax3l.shared.config_schema import ConfigSchema, Leaf
from ax3l.shared.registry import Entry, leaf_domain


def draw_values(schema: ConfigSchema, entry: Entry, rng: random.Random) -> tuple[int | float, ...]:
    """One value per path, uniform over the schema's range: one of its steps where it has
    them, else to three significant digits of the range's top (so values repeat, as in a
    long history)."""
    return tuple(_draw(schema, schema.by_path[path], rng) for path in entry.paths)


def _draw(schema: ConfigSchema, leaf: Leaf, rng: random.Random) -> int | float:
    steps = leaf_domain(leaf)
    if steps is not None:
        return schema.coerce(leaf, rng.choice(steps))
    assert leaf.minimum is not None and leaf.maximum is not None
    decimals = 2 - math.floor(math.log10(abs(leaf.maximum) or 1))
    return round(rng.uniform(leaf.minimum, leaf.maximum), decimals)


def synthetic_history(
    schema: ConfigSchema,
    entry: Entry,
    runs: int,
    *,
    seed: int,
    seeds: int,
    rng: random.Random,
    failed_share: float = 0.1,
) -> ComparableHistory:
    """``runs`` comparable runs of ``entry`` over the ``seeds`` seeds ending at ``seed`` (the
    current one), a ``failed_share`` of them failed; the golden is the schema's defaults."""
    made = tuple(
        HistoryRun(
            str(uuid.UUID(int=rng.getrandbits(128))),
            "failed" if rng.random() < failed_share else "completed",
            rng.randrange(60),
            seed - seeds + 1 + i * seeds // runs,
            draw_values(schema, entry, rng),
        )
        for i in range(runs)
    )
    defaults = schema.default_config()
    golden = tuple(schema.get(defaults, path) for path in entry.paths)
    return ComparableHistory(entry, seed, golden, made)
