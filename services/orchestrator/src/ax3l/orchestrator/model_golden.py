"""``AX3L_GOLDEN=model``: after each comparison the golden follows the model of every run.

Under the spec's rule (``spec``, the default) the golden is the configuration of the last run
that beat it, which on noisy scores is often the luckiest run rather than the best
configuration. Under ``model``, once a comparison is decided, the loop fits the model of every
run (``ax3l.shared.run_model``) and makes the golden the configuration with the best predicted
mean (``AX3L_MODEL_LOWER_BOUND``: the best mean minus that many sds) among those run on the
current seed, so that the next proposals change the configuration the runs say is best. The new
golden's high score is its run's on the current seed: the bar the next run must beat.

A step of its own, derived from the events like every other: it is due when the latest
comparison's decision (its ``golden_config_created`` or ``golden_config_retained``) has no
follow-up child yet. The follow-up is one event, written once: ``golden_config_created`` (kind
``model``, the model's figures in its content) when the golden changes, else
``model_recommendation`` (``golden_changed`` false). A crash before it is written redoes the
step; after it, nothing is redone.
"""

from __future__ import annotations

import logging
from typing import Any

from ax3l.orchestrator.golden import create_golden
from ax3l.orchestrator.run_models import RunModels
from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.db.event_reads import StoredEvent, latest
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import (
    ConfigurationCompared,
    GoldenConfigCreated,
    GoldenConfigRetained,
    ModelRecommendation,
)
from ax3l.shared.run_model import Evaluated, RunModel, TooFewRuns

logger = logging.getLogger(__name__)

SOURCE = "RunModel"
DECISIONS = (GoldenConfigCreated.event, GoldenConfigRetained.event)
FOLLOW_UPS = (GoldenConfigCreated.event, ModelRecommendation.event)


async def pending_follow(db: Database) -> StoredEvent[Any] | None:
    """The latest comparison's decision when the model has not been asked after it yet."""
    compared = await latest(db, ConfigurationCompared)
    if compared is None:
        return None
    decision = await latest(db, DECISIONS, parent=compared.event_id)
    if decision is None or await latest(db, FOLLOW_UPS, parent=decision.event_id) is not None:
        return None
    return decision


async def follow_model(
    db: Database,
    log: EventLog,
    models: RunModels,
    status: LoopStatus,
    decision: StoredEvent[Any],
    golden: GoldenConfigCreated,
    lower_bound: float,
) -> None:
    """Ask the model for its recommendation and make it the golden when it is another one."""
    status.set_phase(Phase.MODELLING)
    records = await models.records(golden.config)
    try:
        model = models.fit(records)
        on_seed = {r.values for r in records if r.seed == golden.seed}
        best = model.recommend(lower_bound_sds=lower_bound, among=on_seed)
    except TooFewRuns as exc:
        await _log_kept(log, decision, golden, problem=str(exc))
        return
    current = models.space.values_of(golden.config)
    if best.values == current:
        await _log_kept(log, decision, golden, model=model, best=best)
        return
    run_id = next(
        r.run_id for r in reversed(records) if r.values == best.values and r.seed == golden.seed
    )
    row = await SnakeLabRuns(db).with_config(models.schema, run_id)
    if row is None or row["high_score"] is None:
        await _log_kept(log, decision, golden, problem=f"run {run_id} has no score any more")
        return
    golden_estimate = model.predict([current])[0]
    reason = (
        f"The model of every run recommends run {run_id}: predicted mean"
        f" {best.estimate.mean:.1f} ± {best.estimate.sd:.1f} over {len(best.run_ids)} run(s),"
        f" against {golden_estimate.mean:.1f} ± {golden_estimate.sd:.1f} for the golden"
        f" (fitted to {len(records)} runs on {len({r.seed for r in records})} seed(s))."
    )
    golden_id = await create_golden(
        db,
        log,
        run_id=run_id,
        config=row["config"],
        high_score=int(row["high_score"]),
        seed=golden.seed,
        reason=reason,
        kind="model",
        parent_event_id=decision.event_id,
        parameter=None,
        extra={
            "previous_run_id": golden.run_id,
            "previous_high_score": golden.high_score,
            **_figures(model, best, len(records)),
            "golden_predicted_mean": round(golden_estimate.mean, 4),
        },
    )
    crash_point("after_model_golden")
    status.set_phase(Phase.MODELLING, golden_run_id=run_id, golden_high_score=row["high_score"])
    logger.info("the golden follows the model (event %s): %s", golden_id, reason)


def _figures(model: RunModel, best: Evaluated, runs: int) -> dict[str, Any]:
    return {
        "predicted_mean": round(best.estimate.mean, 4),
        "predicted_sd": round(best.estimate.sd, 4),
        "config_runs": len(best.run_ids),
        "runs": runs,
        "seeds": len({r.seed for r in model.records}),
    }


async def _log_kept(
    log: EventLog,
    decision: StoredEvent[Any],
    golden: GoldenConfigCreated,
    *,
    model: RunModel | None = None,
    best: Evaluated | None = None,
    problem: str | None = None,
) -> None:
    figures: dict[str, Any] = {}
    if model is not None and best is not None:
        figures = _figures(model, best, len(model.records))
    if problem:
        figures["problem"] = problem
    await log.log(
        ModelRecommendation(
            run_id=golden.run_id if problem is None else None,
            golden_run_id=golden.run_id,
            golden_changed=False,
            **figures,
        ),
        process_id=golden.run_id,
        parent_event_id=decision.event_id,
        source_name=SOURCE,
    )
