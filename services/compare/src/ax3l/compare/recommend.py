"""What a repeat hands over for its held-out re-test (``--recommend``).

* ``golden`` (the default): the loop's golden configuration at each point
  (``retest.recommendations``), the spec's answer.
* ``model``: the configuration the model of every run (``ax3l.shared.run_model``) recommends
  from the repeat's first ``b`` runs, every one of them, races' and rotations' included: the
  best predicted mean (``AX3L_MODEL_LOWER_BOUND``: minus that many sds) among the
  configurations those runs evaluated, never one no run tried. Below the model's
  ``MIN_RUNS`` the golden's answer stands.

The control arm ``default`` recommends the default configuration either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ax3l.compare.retest import Recommendation
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.snakelab_reads import configured_runs
from ax3l.shared.run_model import (
    RunModel,
    Space,
    TooFewRuns,
    fixed_columns,
    records_from_rows,
)
from snakelab.trainers.surrogate import expected_high_score

GOLDEN, MODEL = "golden", "model"
CHOICES = (GOLDEN, MODEL)


def read_run_rows(
    cur: Any, snakelab_db: str, schema: ConfigSchema, limit: int
) -> list[dict[str, Any]]:
    """The first ``limit`` runs of a repeat's SnakeLab (``run_id``, ``status``, ``high_score``
    and every configuration column), in submission order."""
    wanted = ("run_id", "status", "high_score", *schema.columns)
    return [{k: run[k] for k in wanted} for run in configured_runs(cur, snakelab_db, limit)]


def model_recommendations(
    rows: Sequence[Mapping[str, Any]],
    schema: ConfigSchema,
    fallback: Sequence[Recommendation],
    *,
    lower_bound: float,
    surrogate: bool,
) -> list[Recommendation]:
    """At each point of ``fallback`` (the golden's recommendations), the model's: fitted to the
    first ``point`` runs of ``rows``; the golden's where those are too few to fit."""
    if not rows:
        return list(fallback)
    space = Space(schema)
    # The seeding run's untuned settings: the runs the loop made hold them.
    fixed = fixed_columns(schema, schema.unflatten(dict(rows[0])))
    same = [row for row in rows if all(row[c] == v for c, v in fixed.items())]
    position = {str(row["run_id"]): k for k, row in enumerate(rows, start=1)}
    found = []
    for golden in fallback:
        within = [r for r in same if position[str(r["run_id"])] <= golden.at_runs]
        try:
            model = RunModel(space, records_from_rows(within))
        except TooFewRuns:
            found.append(golden)
            continue
        best = model.recommend(lower_bound_sds=lower_bound)
        run_id = best.run_ids[-1]
        config = schema.unflatten(dict(next(r for r in within if r["run_id"] == run_id)))
        expected = expected_high_score(config) if surrogate else None
        found.append(
            replace(golden, golden_run_id=run_id, config=config, expected_score=expected, by=MODEL)
        )
    return found
