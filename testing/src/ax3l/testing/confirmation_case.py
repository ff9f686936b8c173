"""The surrogate case the confirmed-promotion tests share (``AX3L_PROMOTION=confirm``).

Only hidden size is tunable and the seed is 1972, where the surrogate (deterministic per
configuration and seed) gives two telling candidates: hidden size 304 beats the default on
seed 1972 and loses on the confirmation seeds (lucky), 176 beats it on both (better). Tests
compute those scores from the surrogate itself (``scores``) and check the premise.
"""

from __future__ import annotations

from typing import Any

from ax3l.orchestrator.racing import confirmation_seeds
from ax3l.shared.config_schema import ConfigSchema
from ax3l.testing.stack import FIXED_EXCEPT_HIDDEN_SIZE, narrowed_schema
from snakelab.trainers.surrogate import predict_high_score

SEED = 1972
SCHEMA = narrowed_schema(
    {
        "model.hidden_size": {"minimum": 64, "maximum": 384},
        **FIXED_EXCEPT_HIDDEN_SIZE,
        "seed": {"default": SEED},
    }
)
DEFAULT_HIDDEN, LUCKY, BETTER = 224, 304, 176
SEEDS = [SEED, *confirmation_seeds(SEED, 2)]
CONFIRM = {"AX3L_PROMOTION": "confirm", "AX3L_SEED_STAGNANT_ROUNDS": "100"}
RANDOM_HIDDEN = {"random_call": {"hidden_size": [[64, 384, 16]]}}


def scores(hidden_size: int) -> list[int]:
    """The surrogate's high scores of the default config with ``hidden_size`` on ``SEEDS``."""
    schema = ConfigSchema(SCHEMA)
    default = schema.validate(schema.default_config())
    return [
        predict_high_score(
            schema.validate(
                schema.with_values(default, {"model.hidden_size": hidden_size, "seed": s})
            )
        )
        for s in SEEDS
    ]


def submit(value: int) -> dict[str, Any]:
    """The scripted model's reply proposing ``value`` for the turn's single entry."""
    return {"tool_call": {"name": "submit_single_value", "arguments": {"value": value}}}
