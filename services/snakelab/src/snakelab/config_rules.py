"""What a submitted configuration must be: schema defaults, schema rules, the server's rules.

A partial config is first filled with the schema's defaults, then validated by the schema
(strictly: booleans are not numbers, NaN and infinities are refused), then checked against the
rules SnakeLab adds on top of the schema. ``config_hash`` is the contract's SHA-256 of the
complete config as canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ax3l.shared.config_schema import ConfigInvalid, ConfigSchema

# The largest integer each integer column of ``configurations`` holds (tables.py): the schema
# leaves the seed unbounded above, and a seed the column cannot hold is the client's error.
BIGINT_UNSIGNED_MAX = 2**64 - 1
INT_UNSIGNED_MAX = 2**32 - 1
BIGINT_COLUMNS = frozenset({"seed"})


def column_range_errors(schema: ConfigSchema, config: dict[str, Any]) -> list[str]:
    """Integers larger than their ``configurations`` column holds."""
    problems: list[str] = []
    for leaf in schema.leaves:
        if leaf.type != "integer":
            continue
        value = schema.get(config, leaf.path)
        largest = BIGINT_UNSIGNED_MAX if leaf.column in BIGINT_COLUMNS else INT_UNSIGNED_MAX
        if value > largest:
            problems.append(f"$.{leaf.path}: {value} is greater than the maximum of {largest}")
    return problems


def server_rule_errors(schema: ConfigSchema, config: dict[str, Any]) -> list[str]:
    """Problems with the server's own rules (only for a schema-valid config)."""
    problems = column_range_errors(schema, config)
    minimum = schema.get(config, "epsilon.minimum")
    initial = schema.get(config, "epsilon.initial")
    if minimum > initial:
        problems.append(f"$.epsilon.minimum: {minimum} is greater than epsilon.initial ({initial})")
    frames = schema.get(config, "training.replay_max_frames")
    sequence = schema.get(config, "training.sequence_length")
    batch = schema.get(config, "training.batch_size")
    if frames < sequence * batch:
        problems.append(
            f"$.training.replay_max_frames: {frames} is less than sequence_length * batch_size"
            f" ({sequence} * {batch} = {sequence * batch})"
        )
    return problems


def complete_config(schema: ConfigSchema, partial: dict[str, Any]) -> dict[str, Any]:
    """The full, validated config for a submitted (possibly partial) one; else ConfigInvalid.

    Integers come back as ``int`` (``1970.0`` becomes ``1970``), so the stored columns and the
    hash do not depend on how the client wrote a number.
    """
    filled = schema.fill_defaults(partial)
    config = schema.validate(filled)
    problems = server_rule_errors(schema, config)
    if problems:
        raise ConfigInvalid(problems)
    return config


def canonical_json(config: dict[str, Any]) -> str:
    """The config as canonical JSON: sorted keys, no spaces (the contract's hash input)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)


def config_hash(config: dict[str, Any]) -> str:
    """SHA-256 hex of the config's canonical JSON, as stored in ``simulation_runs``."""
    return hashlib.sha256(canonical_json(config).encode("utf-8")).hexdigest()
