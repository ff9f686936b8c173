"""Constrained proposals: the tool schema sent to the model offers only what is still open.

Before each model request the discovered tool's ``inputSchema`` is narrowed (the MCP tool and the
broker's rules stay as they are, and the broker still decides):

* a finite single gets ``enum``: its legal values not yet run on the current seed with every
  other setting equal to the golden (runs of any status count, as for duplicates);
* a finite pair (the reward pair) gets ``anyOf``, one branch per ``value_1`` that still has an
  untested ``value_2``, whose ``value_2`` is an ``enum`` of those;
* continuous settings get ``minimum``/``maximum`` from the schema (an integer one also ``type``).

llama-server turns such schemas into a grammar where the chat template allows; where it does
not, the prompt's list of open values still tells the model what is left
(``AX3L_LLM_CONSTRAINED=off`` sends the tool unchanged, for comparisons).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ax3l.orchestrator.mcp_session import ToolDefinition
from ax3l.shared.config_schema import ConfigSchema, Leaf
from ax3l.shared.registry import Entry, leaf_domain

# Beyond this many values an enum stops helping the model and bloats every request.
ENUM_LIMIT = 512


@dataclass(frozen=True)
class OpenValues:
    """What the model may still propose for an entry on the current seed."""

    entry: Entry
    leaves: tuple[Leaf, ...]
    # Finite entries: the untested choices (tuples in value order); None when continuous.
    choices: tuple[tuple[int | float, ...], ...] | None

    @property
    def finite(self) -> bool:
        return self.choices is not None

    def describe(self) -> str:
        """One line for the prompt: which values are still open."""
        if self.choices is None:
            rules = "; ".join(f"{leaf.path}: {leaf.rules_text()}" for leaf in self.leaves)
            return f"Open values: any legal value not yet tested ({rules})."
        if not self.choices:
            return "Open values: none (every legal choice already ran on this seed)."
        if len(self.leaves) == 1:
            listed = ", ".join(_text(choice[0]) for choice in self.choices)
            return f"Open values for {self.leaves[0].path} (untested on this seed): {listed}."
        by_first: dict[int | float, list[int | float]] = {}
        for first, second in self.choices:
            by_first.setdefault(first, []).append(second)
        parts = [
            f"{_text(first)} with {', '.join(_text(v) for v in seconds)}"
            for first, seconds in by_first.items()
        ]
        names = " and ".join(leaf.path for leaf in self.leaves)
        return f"Open pairs of {names} (untested on this seed): " + "; ".join(parts) + "."


def _value(leaf: Leaf, number: Fraction) -> int | float:
    return int(number) if leaf.type == "integer" else float(number)


def _text(value: int | float) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def open_values(
    schema: ConfigSchema, entry: Entry, tested: set[tuple[Fraction, ...]]
) -> OpenValues:
    """The entry's untested choices, given the ``tested`` keys of the current seed and golden."""
    leaves = tuple(schema.by_path[path] for path in entry.paths)
    domains = [leaf_domain(leaf) for leaf in leaves]
    if any(d is None for d in domains):
        return OpenValues(entry, leaves, None)
    if len(leaves) == 1:
        keys: list[tuple[Fraction, ...]] = [(v,) for v in domains[0] or ()]
    else:
        keys = [(a, b) for a in domains[0] or () for b in domains[1] or ()]
    choices = tuple(
        tuple(_value(leaf, part) for leaf, part in zip(leaves, key, strict=True))
        for key in keys
        if key not in tested
    )
    return OpenValues(entry, leaves, choices)


def _bounds(leaf: Leaf) -> dict[str, Any]:
    narrowed: dict[str, Any] = {"type": "integer" if leaf.type == "integer" else "number"}
    if leaf.minimum is not None:
        narrowed["minimum"] = leaf.minimum
    if leaf.maximum is not None:
        narrowed["maximum"] = leaf.maximum
    return narrowed


def _merged(base: dict[str, Any], narrowed: dict[str, Any]) -> dict[str, Any]:
    """The tool's own property schema with the narrowing on top (its description kept)."""
    merged = {k: v for k, v in base.items() if k in ("description", "title")}
    merged.update(narrowed)
    return merged


def constrained_tool(tool: ToolDefinition, values: OpenValues) -> ToolDefinition:
    """``tool`` with its input schema narrowed to ``values`` (unchanged if nothing fits)."""
    schema = copy.deepcopy(tool.input_schema)
    properties: dict[str, Any] = schema.get("properties") or {}
    names: Sequence[str] = tuple(properties)
    if len(names) != len(values.leaves):
        return tool
    if values.choices is None or len(values.choices) > ENUM_LIMIT or not values.choices:
        for name, leaf in zip(names, values.leaves, strict=True):
            properties[name] = _merged(properties[name], _bounds(leaf))
    elif len(names) == 1:
        (name,) = names
        properties[name] = _merged(properties[name], {"enum": [c[0] for c in values.choices]})
    else:
        first, second = names
        by_first: dict[int | float, list[int | float]] = {}
        for a, b in values.choices:
            by_first.setdefault(a, []).append(b)
        for name, leaf in zip(names, values.leaves, strict=True):
            properties[name] = _merged(properties[name], _bounds(leaf))
        # Each branch is a whole object schema: grammar converters take a branch on its own.
        schema["anyOf"] = [
            {
                "type": "object",
                "properties": {
                    first: _merged(properties[first], {"const": a}),
                    second: _merged(properties[second], {"enum": bs}),
                },
                "required": [first, second],
                "additionalProperties": False,
            }
            for a, bs in by_first.items()
        ]
    schema["properties"] = properties
    return ToolDefinition(tool.name, tool.description, schema)
