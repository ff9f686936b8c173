"""An existing SnakeLab history, adopted on purpose: the user's real export in SnakeLab's tables,
the orchestrator's refusal, ``ax3l-db adopt``, and the loop resuming from the adopted golden."""

from __future__ import annotations

import subprocess
from collections import Counter
from typing import Any

import pytest
from orchestrator_stack import new_run_compared

from ax3l.shared.config_schema import ConfigSchema, load_schema
from ax3l.shared.registry import BY_NAME
from ax3l.testing.databases import create_snakelab_tables, run_module
from ax3l.testing.snakelab_export import ExportedRun, load_history
from ax3l.testing.stack import Stack, narrowed_schema

# Around the export's golden (seed 1972: hidden 272, sequence 32, batch 40, ...): hidden size
# and sequence length narrowed to values the old runs all tried with every other setting equal
# (exhausted only if the old runs count), batch size to five values of which only 46 is untried,
# everything else fixed to the golden's values.
AROUND_THE_GOLDEN = narrowed_schema(
    {
        "model.hidden_size": {"minimum": 256, "maximum": 288, "default": 272},
        "training.sequence_length": {"minimum": 28, "maximum": 36, "default": 32},
        "training.batch_size": {"minimum": 40, "maximum": 48, "default": 40},
        "training.learning_rate": {"const": 0.0021},
        "training.gamma": {"const": 0.965},
        "epsilon.initial": {"const": 0.96},
        "epsilon.decay": {"const": 0.98},
        "game.rewards.closer_to_food": {"const": 3},
        "game.rewards.further_from_food": {"const": -3},
    }
)


def ax3l_db(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    assert stack.schema_path is not None
    env = {**stack.databases.env(), "PATH": "/usr/bin:/bin"}
    env["AX3L_SCHEMA_PATH"] = str(stack.schema_path)
    return run_module("ax3l.shared.db.cli", *args, env=env, timeout=60)


def config_key(run: dict[str, Any], schema: ConfigSchema) -> tuple[float, ...]:
    return tuple(float(run[column]) for column in schema.columns)


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_an_adopted_history_resumes_from_its_golden_and_never_repeats_a_configuration(
    stack: Stack,
) -> None:
    """Runs present and no experiment: the orchestrator stops naming both ways on; after
    ``ax3l-db adopt`` it starts at hidden size from the adopted golden without seeding, old runs
    exhaust entries, and no configuration runs twice."""
    schema = load_schema(stack.use_schema(AROUND_THE_GOLDEN))
    create_snakelab_tables(stack.databases)
    exported: list[ExportedRun] = load_history(stack.databases, schema)
    stack.start()

    refused = stack.orchestrator("random")
    assert refused.wait(60) == 2
    said = refused.log_tail(40)
    assert "fresh SnakeLab database" in said and "`ax3l-db adopt`" in said, said
    assert "Traceback" not in said and not stack.events()

    dry = ax3l_db(stack, "adopt", "--dry-run")
    assert dry.returncode == 0 and "nothing written" in dry.stdout, dry.stderr
    assert not stack.events()
    adopted = ax3l_db(stack, "adopt")
    assert adopted.returncode == 0, adopted.stderr
    (golden,) = stack.events("golden_config_created")
    assert golden.get("kind") == "adopted" and golden.get("simulations") == len(exported)

    proc, first = new_run_compared(stack)  # the first run of Ax3l's
    assert proc.stop() == 0

    events = stack.events()
    assert events[0].event_id == golden.event_id, "nothing before the adoption"
    assert not [e for e in events if e.source_name == "InitialSeeding"], "no seeding"
    checkpoints = [e for e in events if e.name == "round_robin_checkpoint"]
    assert checkpoints[0].get("index") == 0, "the round robin starts at hidden size"
    skipped = [e.parameter for e in events if e.name == "parameter_space_exhausted"]
    assert skipped[:2] == ["hidden_size", "sequence_length"], "old runs exhaust the domains"

    golden_config = schema.flatten(golden.get("config"))
    assert all(
        first[column] == golden_config[column]
        for column in schema.columns
        if column not in BY_NAME["batch_size"].columns
    )
    assert first["training_batch_size"] == 46 and first["seed"] == golden_config["seed"]

    repeated = Counter(config_key(run, schema) for run in stack.runs())
    assert not [key for key, n in repeated.items() if n > 1], "a configuration ran twice"
