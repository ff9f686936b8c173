"""Completing and checking a submitted config, and its hash."""

from __future__ import annotations

import hashlib
import json

import pytest

from ax3l.shared.config_schema import ConfigInvalid, ConfigSchema, load_schema
from snakelab.config_rules import complete_config, config_hash, server_rule_errors

SCHEMA = load_schema()


def relaxed_schema() -> ConfigSchema:
    """The bundled schema with epsilon.minimum and replay_max_frames free to vary."""
    document = json.loads(json.dumps(SCHEMA.document))
    epsilon = document["properties"]["epsilon"]["properties"]["minimum"]
    epsilon.pop("const")
    epsilon.update(minimum=0.0, maximum=1.0)
    replay = document["properties"]["training"]["properties"]["replay_max_frames"]
    replay.pop("const")
    replay.update(minimum=1, maximum=1_000_000)
    return ConfigSchema(document)


def test_an_empty_config_becomes_the_defaults() -> None:
    """{} is completed with every default of the schema."""
    assert complete_config(SCHEMA, {}) == SCHEMA.default_config()


def test_integers_written_as_floats_are_stored_as_integers() -> None:
    """seed 1970.0 and 1970 complete to the same config and the same hash."""
    as_float = complete_config(SCHEMA, {"seed": 1970.0})
    as_int = complete_config(SCHEMA, {"seed": 1970})
    assert type(as_float["seed"]) is int
    assert config_hash(as_float) == config_hash(as_int)


def test_the_hash_is_sha256_of_sorted_compact_json() -> None:
    """config_hash follows the contract's canonical JSON exactly."""
    config = complete_config(SCHEMA, {})
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    assert config_hash(config) == hashlib.sha256(text.encode()).hexdigest()


def test_key_order_does_not_change_the_hash() -> None:
    """Two configs that differ only in key order hash the same."""
    config = complete_config(SCHEMA, {})
    reordered = dict(reversed(list(config.items())))
    assert config_hash(reordered) == config_hash(config)


def test_epsilon_minimum_may_not_exceed_epsilon_initial() -> None:
    """epsilon.minimum > epsilon.initial is refused with both values named."""
    schema = relaxed_schema()
    with pytest.raises(ConfigInvalid) as caught:
        complete_config(schema, {"epsilon": {"initial": 0.9, "minimum": 0.95}})
    assert caught.value.errors == ["$.epsilon.minimum: 0.95 is greater than epsilon.initial (0.9)"]
    assert complete_config(schema, {"epsilon": {"initial": 0.9, "minimum": 0.9}})


def test_replay_memory_must_hold_one_batch_of_windows() -> None:
    """replay_max_frames below sequence_length * batch_size is refused; equal is fine."""
    schema = relaxed_schema()
    config = schema.fill_defaults({"training": {"replay_max_frames": 191}})
    assert server_rule_errors(schema, config) == [
        "$.training.replay_max_frames: 191 is less than sequence_length * batch_size (8 * 24 = 192)"
    ]
    assert complete_config(schema, {"training": {"replay_max_frames": 192}})


def test_schema_errors_come_before_the_server_rules() -> None:
    """A schema violation is reported as such (the cross-field rules need valid values)."""
    with pytest.raises(ConfigInvalid) as caught:
        complete_config(SCHEMA, {"epsilon": {"initial": True}})
    assert caught.value.errors == ["$.epsilon.initial: true is not of type 'number'"]


def test_an_integer_its_column_cannot_hold_is_refused() -> None:
    """A seed above BIGINT UNSIGNED is a config error, not a failed database write."""
    with pytest.raises(ConfigInvalid) as caught:
        complete_config(SCHEMA, {"seed": 2**64})
    assert caught.value.errors == [f"$.seed: {2**64} is greater than the maximum of {2**64 - 1}"]
    assert complete_config(SCHEMA, {"seed": 2**64 - 1})["seed"] == 2**64 - 1
