"""Confirmed promotions (``AX3L_PROMOTION=confirm``): no golden on the strength of one lucky run.

The spec's rule (``single``, the default) promotes a run as soon as its high score beats the
golden's. Under ``confirm`` such a run is a *candidate*: the candidate and the golden are both
run on ``AX3L_CONFIRM_SEEDS`` more seeds, the same for both, and the candidate is promoted only
when its mean over its 1 + R scores is strictly higher than the golden's mean over the same
seeds. Otherwise the golden is retained. The first seed of the list is the current one (the
candidate's own run and the golden's high score); the others are ``seed + 1,000,000 + k``
(k = 1..R), a range no seed rotation reaches: a rotation goes to seed + 1, + 2, ..., and a run
there would make that configuration a duplicate after the rotation.

Exactly once, across any crash:

* The decision to confirm is stored first (``promotion_confirmation_started``, named by the
  candidate's run, with both configurations), then each confirmation run is looked up by its
  configuration before it is submitted through the one exactly-once submitter
  (``ax3l.shared.submit_once``, by way of ``baselines.next_baseline_run``): a restart neither
  submits a run twice nor loses one, and a configuration never runs twice on one seed. A
  golden's runs on those seeds from an earlier confirmation (or its seeding or rotation) are
  reused, not run again.
* Every run is submitted before any is waited for: one SnakeLab queues them, several hosts run
  them at once.
* The outcome is stored (``promotion_confirmation_decided``) before the comparison that
  completes the step, so cycles, stagnation, exhaustion and rotation see one step.

A confirmation run that keeps failing (the baseline bounds: ``AX3L_BASELINE_MAX_ATTEMPTS``,
``AX3L_INFRA_RETRY_MAX``) does not stop the loop: the golden is retained, and the decision says
which run failed. Seeding and a seed rotation, under ``confirm``, score the new golden on the
same seeds (``golden_scores``), so its mean is known before the first candidate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ax3l.orchestrator.attempts import stored_runs
from ax3l.orchestrator.baselines import BaselineFailed, next_baseline_run, wait_scored
from ax3l.orchestrator.services import Runs
from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.orchestrator.waiting import RunOutcome
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import StoredEvent, latest
from ax3l.shared.event_models import (
    GoldenConfigCreated,
    PromotionConfirmationDecided,
    PromotionConfirmationStarted,
    SimulationSubmitted,
)

logger = logging.getLogger(__name__)

SOURCE = "PromotionConfirmation"
PURPOSE = "confirmation"
SEED_OFFSET = 1_000_000


def confirmation_seeds(seed: int, count: int) -> list[int]:
    """The extra seeds of a confirmation on ``seed``: ``seed + 1,000,000 + k``, k = 1..count."""
    return [seed + SEED_OFFSET + k for k in range(1, count + 1)]


def mean(scores: list[int]) -> float:
    return sum(scores) / len(scores)


@dataclass(frozen=True)
class Promotion:
    """``AX3L_PROMOTION`` (``confirm`` when True) and ``AX3L_CONFIRM_SEEDS``."""

    confirm: bool
    seeds: int


@dataclass(frozen=True)
class Scored:
    """A configuration's runs and scores on a confirmation's seeds, in the seeds' order."""

    runs: list[str]
    scores: list[int]


@dataclass(frozen=True)
class Candidate:
    """The run that beat the golden, as the step's comparison saw it."""

    run_id: str
    config: dict[str, Any]
    high_score: int
    ended_event_id: int
    parameter: str | None
    index: int | None


async def started_for(
    db: Database, run_id: str
) -> StoredEvent[PromotionConfirmationStarted] | None:
    """The confirmation begun for ``run_id``, if any (it is finished whatever the setting)."""
    return await latest(db, PromotionConfirmationStarted, process_id=run_id)


async def confirm(
    runs: Runs,
    status: LoopStatus,
    promotion: Promotion,
    candidate: Candidate,
    golden_event_id: int,
    golden: GoldenConfigCreated,
) -> StoredEvent[PromotionConfirmationDecided]:
    """Run candidate and golden on the confirmation seeds and store the decision (once)."""
    started = await started_for(runs.db, candidate.run_id)
    if started is None:
        started = await _start(runs, promotion.seeds, candidate, golden_event_id, golden)
    decided = await latest(runs.db, PromotionConfirmationDecided, parent=started.event_id)
    if decided is not None:
        return decided
    model = started.model
    assert model.seeds is not None and model.seed is not None, f"event {started.event_id}"
    assert model.candidate_config is not None and model.golden_config is not None
    status.set_phase(
        Phase.CONFIRMING,
        run_id=candidate.run_id,
        confirmation={
            "candidate_run_id": candidate.run_id,
            "golden_run_id": model.golden_run_id,
            "seeds": [model.seed, *model.seeds],
        },
    )
    what = f"confirmation of run {candidate.run_id}"
    try:
        candidate_on, golden_on = await score_on_seeds(
            runs,
            [model.candidate_config, model.golden_config],
            model.seeds,
            what=what,
            parent_event_id=started.event_id,
        )
    except BaselineFailed as exc:
        return await _decide(runs, started, None, None, problem=str(exc))
    candidate_scored = Scored(
        [candidate.run_id, *candidate_on.runs], [candidate.high_score, *candidate_on.scores]
    )
    assert model.golden_high_score is not None and model.golden_run_id is not None
    golden_scored = Scored(
        [model.golden_run_id, *golden_on.runs], [model.golden_high_score, *golden_on.scores]
    )
    return await _decide(runs, started, candidate_scored, golden_scored)


async def _start(
    runs: Runs,
    count: int,
    candidate: Candidate,
    golden_event_id: int,
    golden: GoldenConfigCreated,
) -> StoredEvent[PromotionConfirmationStarted]:
    seeds = confirmation_seeds(golden.seed, count)
    await runs.log.log(
        PromotionConfirmationStarted(
            candidate_run_id=candidate.run_id,
            golden_run_id=golden.run_id,
            golden_event_id=golden_event_id,
            seed=golden.seed,
            seeds=seeds,
            candidate_high_score=candidate.high_score,
            golden_high_score=golden.high_score,
            candidate_config=candidate.config,
            golden_config=golden.config,
            parameter=candidate.parameter,
            index=candidate.index,
        ),
        process_id=candidate.run_id,
        parent_event_id=candidate.ended_event_id,
        parameter=candidate.parameter,
        source_name=SOURCE,
    )
    logger.info(
        "run %s beat the golden (%s > %s): confirming on seeds %s",
        candidate.run_id,
        candidate.high_score,
        golden.high_score,
        seeds,
    )
    crash_point("confirmation_started")
    started = await started_for(runs.db, candidate.run_id)
    assert started is not None
    return started


async def _decide(
    runs: Runs,
    started: StoredEvent[PromotionConfirmationStarted],
    candidate: Scored | None,
    golden: Scored | None,
    problem: str | None = None,
) -> StoredEvent[PromotionConfirmationDecided]:
    model = started.model
    fields: dict[str, Any] = {}
    if candidate is not None and golden is not None:
        # Same number of scores on both sides: comparing sums is comparing means, exactly.
        won = sum(candidate.scores) > sum(golden.scores)
        fields = {
            "candidate_scores": candidate.scores,
            "golden_scores": golden.scores,
            "candidate_runs": candidate.runs,
            "golden_runs": golden.runs,
            "candidate_mean": round(mean(candidate.scores), 4),
            "golden_mean": round(mean(golden.scores), 4),
        }
    else:
        won = False
        fields = {"problem": problem}
    assert model.seed is not None and model.seeds is not None
    await runs.log.log(
        PromotionConfirmationDecided(
            candidate_run_id=model.candidate_run_id,
            golden_run_id=model.golden_run_id,
            seeds=[model.seed, *model.seeds],
            decision="promoted" if won else "retained",
            **fields,
        ),
        process_id=started.process_id,
        parent_event_id=started.event_id,
        parameter=model.parameter,
        source_name=SOURCE,
    )
    crash_point("confirmation_decided")
    decided = await latest(runs.db, PromotionConfirmationDecided, parent=started.event_id)
    assert decided is not None
    return decided


async def score_on_seeds(
    runs: Runs,
    configs: list[dict[str, Any]],
    seeds: list[int],
    *,
    what: str,
    parent_event_id: int | None,
) -> list[Scored]:
    """Each configuration on every one of ``seeds``: all submitted first, then waited for."""
    on_seeds = [_on_seed(runs.schema, config, seed) for config in configs for seed in seeds]
    records = [
        await confirmation_run(runs, each, what=what, parent_event_id=parent_event_id)
        for each in on_seeds
    ]
    outcomes = [
        await wait_scored(runs, run_id, record_id, what, "confirmation_waiting")
        for run_id, record_id in records
    ]
    return [
        _scored_list(outcomes[at : at + len(seeds)]) for at in range(0, len(outcomes), len(seeds))
    ]


def _on_seed(schema: ConfigSchema, config: dict[str, Any], seed: int) -> dict[str, Any]:
    return schema.validate(schema.with_values(config, {"seed": seed}))


def _scored_list(outcomes: list[RunOutcome]) -> Scored:
    scores = []
    for outcome in outcomes:
        assert outcome.high_score is not None
        scores.append(outcome.high_score)
    return Scored([outcome.run_id for outcome in outcomes], scores)


async def confirmation_run(
    runs: Runs,
    config: dict[str, Any],
    *,
    what: str,
    parent_event_id: int | None,
) -> tuple[str, int]:
    """``(run_id, simulation_submitted event id)`` of ``config``'s run: a recorded run that can
    still score (an earlier confirmation's, reused), else the next one, recorded and submitted
    exactly once within the baseline bounds (``BaselineFailed`` past them)."""
    for run in reversed(await stored_runs(runs.db, runs.index, config)):
        if run.ended_unscored:
            continue
        record = await latest(runs.db, SimulationSubmitted, process_id=run.run_id)
        if record is not None:
            return run.run_id, record.event_id
    crash_point("confirmation_before_submit")
    return await next_baseline_run(
        runs,
        config,
        what=f"{what} (seed {config['seed']})",
        purpose=PURPOSE,
        source_name=SOURCE,
        parent_event_id=parent_event_id,
        crash_after_submit="confirmation_after_submit",
    )


def confirmed_golden_fields(decided: PromotionConfirmationDecided) -> dict[str, Any]:
    """The confirmation fields a promoted candidate's ``golden_config_created`` carries."""
    return {
        "confirmation_seeds": decided.seeds,
        "confirmation_scores": decided.candidate_scores,
        "confirmation_runs": decided.candidate_runs,
        "mean_high_score": decided.candidate_mean,
    }


async def submit_baseline_confirmation(
    runs: Runs, promotion: Promotion, config: dict[str, Any], seed: int, parent_event_id: int
) -> None:
    """Under ``confirm``, a new baseline's runs on its confirmation seeds, submitted (exactly
    once, each recorded) while its own run is still to be waited for, so that several SnakeLab
    hosts train them beside it; ``baseline_fields`` then finds and waits for them."""
    if not promotion.confirm:
        return
    for each in confirmation_seeds(seed, promotion.seeds):
        await confirmation_run(
            runs,
            _on_seed(runs.schema, config, each),
            what=f"seed {seed} baseline's confirmation",
            parent_event_id=parent_event_id,
        )


async def baseline_fields(
    runs: Runs,
    promotion: Promotion,
    run_id: str,
    config: dict[str, Any],
    high_score: int,
    seed: int,
    parent_event_id: int | None,
) -> dict[str, Any]:
    """Under ``confirm``, a new baseline golden's scores on its confirmation seeds (seeding and
    seed rotation), so its mean is known before the first candidate; nothing under ``single``.
    """
    if not promotion.confirm:
        return {}
    seeds = confirmation_seeds(seed, promotion.seeds)
    (scored,) = await score_on_seeds(
        runs,
        [config],
        seeds,
        what=f"seed {seed} baseline's confirmation",
        parent_event_id=parent_event_id,
    )
    scores = [high_score, *scored.scores]
    return {
        "confirmation_seeds": [seed, *seeds],
        "confirmation_scores": scores,
        "confirmation_runs": [run_id, *scored.runs],
        "mean_high_score": round(mean(scores), 4),
    }
