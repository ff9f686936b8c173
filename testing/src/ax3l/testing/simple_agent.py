"""What a simple outside agent proposes for a seats' turn (``current_turn``'s answer): an open
choice when the turn lists them, else a random legal number for each value."""

from __future__ import annotations

import random
from typing import Any

from ax3l.shared.config_schema import load_schema
from ax3l.shared.registry import BY_NAME

SCHEMA = load_schema(None)


def choose(turn: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The turn's tool arguments: an open choice, else a random number within each range."""
    choices = turn["open_values"]["choices"]
    if choices:
        return dict(zip(turn["arguments"], rng.choice(choices), strict=True))
    entry = BY_NAME[turn["entry"]]
    values = {}
    for argument, path in zip(entry.value_names, entry.paths, strict=True):
        leaf = SCHEMA.by_path[path]
        assert leaf.minimum is not None and leaf.maximum is not None
        values[argument] = round(rng.uniform(float(leaf.minimum), float(leaf.maximum)), 5)
    return values
