"""The parameter registry: what the round robin visits and what each entry may change.

Ranges and steps come from the schema file; this module only knows names, paths and order.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, get_args

from ax3l.shared.canonical import canonical_number
from ax3l.shared.config_schema import ConfigSchema, Leaf

EntryKind = Literal["single", "pair"]
# The scale a tuned value is compared on, declared per path as Optuna's ``log=True`` is: on
# ``log`` a doubling is one step wherever it starts (sizes, learning rates); on
# ``log_complement`` the step is in log(1 - x), the horizon of a discount factor or the
# episodes an exploration decay takes (0.99 -> 0.999 is as large as 0.9 -> 0.99); ``linear``
# otherwise. Models of the runs (``ax3l.shared.run_model``) measure distance on these scales.
Scale = Literal["linear", "log", "log_complement"]


@dataclass(frozen=True)
class Entry:
    """One step of the round robin: a single parameter or a parameter pair."""

    name: str
    kind: EntryKind
    paths: tuple[str, ...]  # config paths, in value order
    value_names: tuple[str, ...]  # tool argument names, same order as paths

    @property
    def tool_name(self) -> str:
        return "submit_single_value" if self.kind == "single" else "submit_pair_values"

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(path.replace(".", "_") for path in self.paths)


ENTRIES: tuple[Entry, ...] = (
    Entry("hidden_size", "single", ("model.hidden_size",), ("value",)),
    Entry("sequence_length", "single", ("training.sequence_length",), ("value",)),
    Entry("batch_size", "single", ("training.batch_size",), ("value",)),
    Entry("learning_rate", "single", ("training.learning_rate",), ("value",)),
    Entry("gamma", "single", ("training.gamma",), ("value",)),
    Entry("epsilon_pair", "pair", ("epsilon.initial", "epsilon.decay"), ("value_1", "value_2")),
    Entry(
        "reward_pair",
        "pair",
        ("game.rewards.closer_to_food", "game.rewards.further_from_food"),
        ("value_1", "value_2"),
    ),
)

SCALES: dict[str, Scale] = {
    "model.hidden_size": "log",
    "training.sequence_length": "log",
    "training.batch_size": "log",
    "training.learning_rate": "log",
    "training.gamma": "log_complement",
    "epsilon.initial": "linear",
    "epsilon.decay": "log_complement",
    "game.rewards.closer_to_food": "linear",
    "game.rewards.further_from_food": "linear",
}
# Every tuned path, in round-robin order (the entries' paths, each once).
TUNED_PATHS: tuple[str, ...] = tuple(path for entry in ENTRIES for path in entry.paths)
if set(SCALES) != set(TUNED_PATHS):
    raise ImportError(f"SCALES {sorted(SCALES)} must name exactly the tuned paths")

PARAMETER_ORDER: tuple[str, ...] = tuple(entry.name for entry in ENTRIES)
# The entries' names as a type (a tool argument that must be one of them, e.g. the seats'
# ``history``); checked against ENTRIES at import.
EntryName = Literal[
    "hidden_size",
    "sequence_length",
    "batch_size",
    "learning_rate",
    "gamma",
    "epsilon_pair",
    "reward_pair",
]
if get_args(EntryName) != PARAMETER_ORDER:
    raise ImportError(f"EntryName {get_args(EntryName)} is not {PARAMETER_ORDER}")
BY_NAME: dict[str, Entry] = {entry.name: entry for entry in ENTRIES}
SINGLES: tuple[str, ...] = tuple(e.name for e in ENTRIES if e.kind == "single")
PAIRS: tuple[str, ...] = tuple(e.name for e in ENTRIES if e.kind == "pair")


class UnknownParameter(KeyError):
    """A name that is not a single parameter or pair of the round robin."""


def entry(name: str) -> Entry:
    """The registry entry called ``name``."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownParameter(
            f"unknown parameter {name!r}; known: {', '.join(PARAMETER_ORDER)}"
        ) from None


def leaf_domain(leaf: Leaf) -> list[Fraction] | None:
    """Every legal value of a leaf as exact fractions, or None when the domain is continuous."""
    if "const" in leaf.schema:
        return [canonical_number(leaf.const)]
    if leaf.minimum is None or leaf.maximum is None:
        return None
    step = leaf.multiple_of
    if step is None:
        if leaf.type != "integer":
            return None
        step = 1
    low, high, unit = (canonical_number(v) for v in (leaf.minimum, leaf.maximum, step))
    first = math.ceil(low / unit)
    last = math.floor(high / unit)
    values = [k * unit for k in range(first, last + 1)]
    if leaf.type == "integer":
        values = [v for v in values if v.denominator == 1]
    return values


def domain(schema: ConfigSchema, item: Entry) -> list[tuple[Fraction, ...]] | None:
    """Every legal choice of an entry (tuples in value order), or None if any part is continuous."""
    parts = [leaf_domain(schema.by_path[path]) for path in item.paths]
    if any(part is None for part in parts):
        return None
    return [tuple(choice) for choice in itertools.product(*parts)]  # type: ignore[arg-type]
