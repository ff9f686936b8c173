"""Tool and argument descriptions: the assigned parameter, its schema text and rules.

Everything about a setting (description, range, step, unit) comes from SnakeLab's schema
file, so the model reads the same rules the broker enforces.
"""

from __future__ import annotations

from ax3l.app.snakelab.tools.binding import Binding
from ax3l.shared import registry
from ax3l.shared.config_schema import ConfigSchema

RESULT_TEXT = (
    'The result is JSON: {"status": "ok", "run_id": ...} when SnakeLab accepted the run, or'
    ' {"status": "rejected", "code": "invalid_value" or "duplicate_config", "reason": ...,'
    ' "prompt": ...} with what to do next. Ax3l, not this tool, decides whether a value is'
    " legal, new and submitted."
)


def setting_text(schema: ConfigSchema, path: str) -> str:
    """``path: description Rules: ...`` for one setting."""
    leaf = schema.by_path[path]
    description = leaf.description.strip()
    if description and description[-1] not in ".!?":
        description += "."
    return f"{path}: {description} Rules: {leaf.rules_text()}.".replace(":  ", ": ")


def mapping_table() -> str:
    """The value_1/value_2 mapping of every pair, as a Markdown table."""
    rows = ["| Assignment | value_1 | value_2 |", "|---|---|---|"]
    for name in registry.PAIRS:
        item = registry.entry(name)
        rows.append(f"| {name} | {item.paths[0]} | {item.paths[1]} |")
    return "\n".join(rows)


def single_description(binding: Binding, schema: ConfigSchema) -> str:
    item = binding.entry
    if item is not None and item.kind == "single":
        path = item.paths[0]
        return (
            f"Submit one new value for {item.name}, the parameter assigned to this"
            f" conversation (setting {path}). Ax3l copies the current golden configuration,"
            " changes only this setting, checks the result and starts a SnakeLab run.\n\n"
            f"{setting_text(schema, path)}\n\n"
            'Call it with {"value": <JSON number>}; strings and booleans are refused.'
            f" {RESULT_TEXT}"
        )
    return (
        "Submit one new value for the single parameter assigned to this conversation"
        f" ({', '.join(registry.SINGLES)}).\n\n{binding.refusal('single') or ''}\n\n"
        f"{RESULT_TEXT}"
    )


def pair_description(binding: Binding, schema: ConfigSchema) -> str:
    item = binding.entry
    intro = (
        "Submit two new values for the parameter pair assigned to this conversation. The"
        " values map to settings like this:\n\n"
        f"{mapping_table()}\n\n"
    )
    if item is not None and item.kind == "pair":
        return (
            f"{intro}This conversation is assigned {item.name}. Ax3l copies the current golden"
            " configuration, changes only these two settings, checks the result and starts a"
            " SnakeLab run. Either value may stay at its golden value as long as the other"
            " changes.\n\n"
            f"- value_1 = {setting_text(schema, item.paths[0])}\n"
            f"- value_2 = {setting_text(schema, item.paths[1])}\n\n"
            'Call it with {"value_1": <JSON number>, "value_2": <JSON number>}; strings and'
            f" booleans are refused. {RESULT_TEXT}"
        )
    return f"{intro}{binding.refusal('pair') or ''}\n\n{RESULT_TEXT}"


def value_description(binding: Binding, kind: registry.EntryKind, position: int) -> str:
    """The argument description of ``value`` (position 0) or ``value_1``/``value_2``."""
    item = binding.entry
    if item is None or item.kind != kind:
        return "The proposed value, a JSON number."
    return f"The proposed value of {item.paths[position]}, a JSON number."
