import json

import pytest

from ax3l.shared import registry
from ax3l.shared.config_schema import load_schema

SCHEMA = load_schema()


def test_round_robin_order_and_value_names():
    """The seven entries in schema order with the spec's value_1/value_2 mapping."""
    assert registry.PARAMETER_ORDER == (
        "hidden_size",
        "sequence_length",
        "batch_size",
        "learning_rate",
        "gamma",
        "epsilon_pair",
        "reward_pair",
    )
    eps = registry.entry("epsilon_pair")
    assert eps.paths == ("epsilon.initial", "epsilon.decay")
    assert eps.value_names == ("value_1", "value_2") and eps.tool_name == "submit_pair_values"
    rewards = registry.entry("reward_pair")
    assert rewards.columns == ("game_rewards_closer_to_food", "game_rewards_further_from_food")
    assert registry.entry("gamma").tool_name == "submit_single_value"


def test_domain_sizes_come_from_the_schema():
    """Finite domains have the sizes the schema implies; continuous ones are None."""
    sizes = {
        e.name: (None if (d := registry.domain(SCHEMA, e)) is None else len(d))
        for e in registry.ENTRIES
    }
    assert sizes == {
        "hidden_size": 21,
        "sequence_length": 12,
        "batch_size": 29,
        "learning_rate": None,
        "gamma": None,
        "epsilon_pair": None,
        "reward_pair": 49,
    }


def test_domain_sizes_follow_a_changed_schema_file(tmp_path):
    """Change the file's ranges and the domains follow: nothing is hard-coded."""
    document = json.loads(json.dumps(SCHEMA.document))
    props = document["properties"]
    props["model"]["properties"]["hidden_size"].update(minimum=32, maximum=128, multipleOf=32)
    props["game"]["properties"]["rewards"]["properties"]["closer_to_food"]["maximum"] = 2
    props["training"]["properties"]["gamma"]["multipleOf"] = 0.01
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(document))
    changed = load_schema(path)
    assert len(registry.domain(changed, registry.entry("hidden_size"))) == 4
    assert len(registry.domain(changed, registry.entry("reward_pair"))) == 3 * 7
    gamma = registry.domain(changed, registry.entry("gamma"))
    assert gamma is not None and len(gamma) == 10


def test_unknown_parameter_names_are_refused():
    """Seed and schema-fixed settings are not entries of the registry."""
    for name in ("seed", "model.layers", "epochs", ""):
        with pytest.raises(registry.UnknownParameter, match="unknown parameter"):
            registry.entry(name)
