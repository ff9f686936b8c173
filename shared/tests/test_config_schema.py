import copy
import json
import math
from decimal import Decimal

import pytest

from ax3l.shared.config_schema import (
    ConfigInvalid,
    SchemaFileError,
    config_changes,
    dotted_paths,
    load_schema,
)

SCHEMA = load_schema()


def default():
    return copy.deepcopy(SCHEMA.default_config())


def test_default_config_is_valid_and_has_26_columns():
    """The schema's defaults form a complete, valid config of 26 numeric columns."""
    config = SCHEMA.default_config()
    assert SCHEMA.errors(config) == []
    assert len(SCHEMA.columns) == 26
    assert config["model"]["hidden_size"] == 224
    assert config["seed"] == 1970


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("model.hidden_size", 70, "$.model.hidden_size: 70 is not a multiple of 16"),
        ("model.hidden_size", 400, "$.model.hidden_size: 400 is greater than the maximum of 384"),
        ("epochs", 10, "$.epochs: 10 is less than the minimum of 500"),
        ("model.hidden_size", True, "$.model.hidden_size: true is not of type 'integer'"),
        ("training.gamma", False, "$.training.gamma: false is not of type 'number'"),
        ("training.gamma", "0.95", "$.training.gamma: \"0.95\" is not of type 'number'"),
        ("training.gamma", math.nan, "$.training.gamma: nan is not a finite number"),
        ("training.gamma", math.inf, "$.training.gamma: inf is not a finite number"),
        ("model.hidden_size", 64.5, "$.model.hidden_size: 64.5 is not of type 'integer'"),
        ("model.layers", 3, "$.model.layers: 4 was expected"),
    ],
)
def test_invalid_values_name_path_and_rule(path, value, message):
    """Every refused value yields a message naming its JSON path and the broken rule."""
    config = SCHEMA.with_values(default(), {path: value})
    with pytest.raises(ConfigInvalid) as info:
        SCHEMA.validate(config)
    assert message in info.value.errors


def test_seed_must_be_a_non_zero_integer():
    """A seed of 0 is refused with its path and rule, and 1, the smallest legal seed, passes."""
    with pytest.raises(ConfigInvalid) as info:
        SCHEMA.validate(SCHEMA.with_values(default(), {"seed": 0}))
    assert info.value.errors == ["$.seed: 0 is less than the minimum of 1"]
    assert SCHEMA.validate(SCHEMA.with_values(default(), {"seed": 1}))["seed"] == 1


def test_integer_fields_accept_integral_floats_and_return_ints():
    """64.0 is a legal hidden size and comes back as the int 64."""
    config = SCHEMA.with_values(default(), {"model.hidden_size": 64.0, "seed": 1971.0})
    valid = SCHEMA.validate(config)
    assert valid["model"]["hidden_size"] == 64 and type(valid["model"]["hidden_size"]) is int
    assert type(valid["seed"]) is int


def test_extra_and_missing_keys_are_refused():
    """additionalProperties false at every level and every key required."""
    config = default()
    config["model"]["colour"] = 1
    assert any("colour" in e for e in SCHEMA.errors(config))
    config = default()
    del config["training"]["gamma"]
    assert any("'gamma' is a required property" in e for e in SCHEMA.errors(config))


def test_fill_defaults_completes_a_partial_config():
    """A partial config gets every missing leaf from the schema's defaults."""
    filled = SCHEMA.fill_defaults({"seed": 5, "training": {"gamma": 0.91}})
    assert SCHEMA.errors(filled) == []
    assert filled["seed"] == 5 and filled["training"]["gamma"] == 0.91
    assert filled["training"]["batch_size"] == 24


def test_flatten_and_unflatten_round_trip_with_types():
    """Flattening names the 26 SnakeLab columns; unflattening restores ints where integer."""
    flat = SCHEMA.flatten(default())
    assert list(flat)[:3] == ["epochs", "seed", "game_board_width"]
    assert "game_rewards_closer_to_food" in flat and "epsilon_decay" in flat
    as_sql = {k: float(v) for k, v in flat.items()}  # DOUBLE columns come back as floats
    nested = SCHEMA.unflatten(as_sql)
    assert nested == default()
    assert type(nested["game"]["rewards"]["closer_to_food"]) is int
    assert type(nested["training"]["learning_rate"]) is float


def test_the_loops_diff_reads_both_configs_in_the_schemas_types():
    """The comparison's changes name each setting that differs, in schema order, as the schema's
    types: a run read back from SQL (floats, Decimals) differs only where a value does."""
    golden, run = default(), default()
    run["training"]["gamma"] = 0.5
    run["model"]["hidden_size"] = 272
    as_sql = {k: Decimal(str(v)) for k, v in SCHEMA.flatten(run).items()}
    changes = SCHEMA.changes(golden, SCHEMA.unflatten(as_sql))
    hidden = golden["model"]["hidden_size"]
    assert changes == {"model.hidden_size": [hidden, 272], "training.gamma": [0.96, 0.5]}
    assert type(changes["model.hidden_size"][1]) is int
    assert SCHEMA.changes(golden, {**golden, "seed": float(golden["seed"])}) == {}


def test_the_pages_diff_takes_any_shape_and_names_removed_paths():
    """A stored config is not trusted to fit the schema: any nesting reads by dotted path, and a
    path only the older one has is a change to None."""
    before = {"a": {"b": 1, "gone": 2}, "list": [1]}
    after = {"a": {"b": 1.0, "c": {"d": None}}, "list": [1, 2], "x": "y"}
    assert dotted_paths(after) == {"a.b": 1.0, "a.c.d": None, "list": [1, 2], "x": "y"}
    assert config_changes(before, after) == {
        "list": [[1], [1, 2]],
        "x": [None, "y"],
        "a.gone": [2, None],
    }
    assert config_changes(None, "not a config") == {}


def test_schema_loads_from_a_path_and_reports_bad_files(tmp_path):
    """The schema is read from the given path; unreadable or invalid files are clear errors."""
    document = json.loads(json.dumps(SCHEMA.document))
    document["properties"]["model"]["properties"]["hidden_size"]["maximum"] = 128
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(document))
    assert load_schema(path).by_path["model.hidden_size"].maximum == 128
    with pytest.raises(SchemaFileError, match="cannot read"):
        load_schema(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(SchemaFileError, match="not JSON"):
        load_schema(tmp_path / "bad.json")


def test_every_property_has_a_description():
    """The LLM is shown each tunable's description, so none may be empty."""
    assert all(leaf.description for leaf in SCHEMA.leaves)


def test_each_leafs_constraints_as_data_say_what_its_rules_text_says():
    """``constraints()`` gives an agent the rules without parsing prose: every tuned leaf's type,
    bounds and step are the schema document's own, and its words name the same numbers."""
    schema = load_schema(None)
    for path in ("model.hidden_size", "training.learning_rate", "epsilon.decay"):
        leaf = schema.by_path[path]
        data = leaf.constraints()
        assert data["type"] == leaf.schema["type"]
        assert (data["minimum"], data["maximum"]) == (
            leaf.schema["minimum"],
            leaf.schema["maximum"],
        )
        assert data["multiple_of"] == leaf.schema.get("multipleOf")
        assert f"from {data['minimum']} to {data['maximum']}" in leaf.rules_text()
    assert set(schema.by_path["model.hidden_size"].constraints()) == {
        "type", "minimum", "maximum", "multiple_of", "const", "unit"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("path", "low", "high"),
    [
        ("training.gamma", 0.9, 0.99),  # spec 001: gamma 0.9-0.99
        ("training.learning_rate", 0.0005, 0.005),  # 0.0005-0.005
        ("epsilon.initial", 0.85, 0.999),  # 0.85-0.999
        ("epsilon.decay", 0.9, 0.999),  # 0.9-0.999
    ],
)
def test_the_continuous_ranges_are_the_specs_both_ends_included(path, low, high):
    """The spec's continuous ranges, pinned by number (R9-R12): both ends valid, a step past
    either refused with the bound named."""
    for inside in (low, high, (low + high) / 2):
        assert SCHEMA.errors(SCHEMA.with_values(default(), {path: inside})) == [], inside
    below = SCHEMA.errors(SCHEMA.with_values(default(), {path: low - low / 1000}))
    above = SCHEMA.errors(SCHEMA.with_values(default(), {path: high + high / 1000}))
    assert below == [f"$.{path}: {low - low / 1000} is less than the minimum of {low}"]
    assert above == [f"$.{path}: {high + high / 1000} is greater than the maximum of {high}"]
