"""A quick "certainly valid" check for configs, fastjsonschema's validator compiled from the
schema; jsonschema decides.

Validating a config with jsonschema costs a few hundred microseconds, and SnakeLab and the
toolbroker validate every submission. Almost every config they see is valid, so fastjsonschema
(which compiles the schema to Python) answers first: when it says a config is valid, jsonschema
would say so too, and the full validation (with its messages) is skipped. When it says anything
else, or the schema uses a keyword outside those below (fastjsonschema knows drafts up to
2019-09, the schema is 2020-12), jsonschema runs as before.

The check only ever answers "valid" where JSON Schema 2020-12 does; it may answer "not sure"
more often (a number that is neither ``int`` nor ``float``), which costs nothing but the
fallback. ``bench/bench_config_validation.py`` times it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import fastjsonschema

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
# The keywords SnakeLab's schema uses, which fastjsonschema reads as JSON Schema 2020-12 does.
KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "const",
        "enum",
    }
)


def _known(node: Any) -> bool:
    """Whether the schema ``node`` uses only ``KEYWORDS`` (and annotations), all the way down."""
    if not isinstance(node, dict):
        return False
    for key, value in node.items():
        if key in ANNOTATIONS or key.startswith("x-"):
            continue
        if key not in KEYWORDS or (key == "additionalProperties" and not isinstance(value, bool)):
            return False
        if key == "properties" and not (
            isinstance(value, dict) and all(_known(sub) for sub in value.values())
        ):
            return False
    return True


def compile_schema(node: Any) -> Check | None:
    """A function telling whether an instance is certainly valid, or None for this schema.

    None means the schema uses something this check does not model: every config then goes
    to jsonschema.
    """
    if not _known(node):
        return None
    try:
        validate = fastjsonschema.compile(node, use_default=False, use_formats=False)
    except fastjsonschema.JsonSchemaDefinitionException:
        return None

    def valid(instance: Any) -> bool:
        try:
            validate(instance)
        except (fastjsonschema.JsonSchemaValueException, TypeError, ArithmeticError):
            return False  # not sure (a Decimal's arithmetic with a float bound, say)
        return True

    return valid
