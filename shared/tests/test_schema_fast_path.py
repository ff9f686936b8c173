"""The quick validity check never calls a config valid that jsonschema refuses."""

from __future__ import annotations

import copy
import math
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ax3l.shared.config_schema import ConfigSchema, load_schema
from ax3l.shared.schema_fast_path import compile_schema

SCHEMA = load_schema()
JSONSCHEMA = Draft202012Validator(SCHEMA.document)
CERTAINLY_VALID = compile_schema(SCHEMA.document)
PATHS = [leaf.path for leaf in SCHEMA.leaves]


def jsonschema_valid(config: Any) -> bool:
    return not list(JSONSCHEMA.iter_errors(config))


def edge_values(path: str) -> list[Any]:
    """Values on and around every bound and step of one leaf."""
    leaf = SCHEMA.by_path[path]
    values: list[Any] = [leaf.default]
    for bound in (leaf.minimum, leaf.maximum, leaf.const):
        if bound is not None:
            values += [bound, float(bound), bound - 1, bound + 1, bound - 1e-9, bound + 1e-9]
    if leaf.multiple_of is not None:
        base = leaf.default or 0
        values += [base + leaf.multiple_of, base + leaf.multiple_of / 2, base * 1.0]
    return values


ODD_VALUES = st.one_of(
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.just(math.nan),
    st.just(math.inf),
    st.just(-math.inf),
    st.builds(Decimal, st.integers(-5, 5)),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-1e6, 1e6),
)


@st.composite
def mutated_configs(draw: st.DrawFn) -> Any:
    config = copy.deepcopy(SCHEMA.default_config())
    for _ in range(draw(st.integers(0, 4))):
        path = draw(st.sampled_from(PATHS))
        parts = path.split(".")
        node = config
        for part in parts[:-1]:
            node = node[part] if isinstance(node.get(part), dict) else node
        action = draw(st.sampled_from(["edge", "odd", "delete", "extra", "replace_parent"]))
        if action == "edge":
            node[parts[-1]] = draw(st.sampled_from(edge_values(path)))
        elif action == "odd":
            node[parts[-1]] = draw(ODD_VALUES)
        elif action == "delete":
            node.pop(parts[-1], None)
        elif action == "extra":
            node[draw(st.sampled_from(["extra", parts[-1] + "_x", "seed"]))] = 1
        elif len(parts) > 1:
            config[parts[0]] = draw(ODD_VALUES)
    return config


def test_the_bundled_schema_compiles_and_the_defaults_are_certainly_valid() -> None:
    """The fast path is really taken for SnakeLab's schema and its default config."""
    assert CERTAINLY_VALID is not None
    assert CERTAINLY_VALID(SCHEMA.default_config()) is True


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(mutated_configs())
def test_certainly_valid_implies_jsonschema_valid(config: Any) -> None:
    """Whenever the quick check says valid, jsonschema agrees (the reverse need not hold)."""
    assert CERTAINLY_VALID is not None
    if CERTAINLY_VALID(config):
        assert jsonschema_valid(config), config


@given(st.sampled_from(PATHS), st.data())
def test_edge_values_get_the_same_answer_as_jsonschema(path: str, data: st.DataObject) -> None:
    """On plain ints and floats around the bounds the two agree exactly (no needless fallback)."""
    assert CERTAINLY_VALID is not None
    config = copy.deepcopy(SCHEMA.default_config())
    parts = path.split(".")
    node = config
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = data.draw(st.sampled_from(edge_values(path)))
    assert CERTAINLY_VALID(config) == jsonschema_valid(config), (path, node[parts[-1]])


def test_an_unknown_keyword_turns_the_fast_path_off_and_validation_still_works() -> None:
    """A schema with a keyword the quick check does not model goes to jsonschema every time."""
    document = copy.deepcopy(SCHEMA.document)
    document["properties"]["seed"]["not"] = {"const": 13}
    assert compile_schema(document) is None
    schema = ConfigSchema(document)
    config = schema.default_config()
    config["seed"] = 13
    assert schema.errors(config) == ["$.seed: 13 should not be valid under {'const': 13}"]
    config["seed"] = 14
    assert schema.errors(config) == []


def test_invalid_configs_still_get_jsonschemas_messages() -> None:
    """A config the quick check doubts is reported by jsonschema with path and rule."""
    config = copy.deepcopy(SCHEMA.default_config())
    config["model"]["hidden_size"] = 70
    config["training"]["extra"] = 1
    assert SCHEMA.errors(config) == [
        "$.model.hidden_size: 70 is not a multiple of 16",
        "$.training: Additional properties are not allowed ('extra' was unexpected)",
    ]
