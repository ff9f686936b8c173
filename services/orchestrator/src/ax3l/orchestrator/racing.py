"""Promotion trials: a run that beat the golden is run again beside it before it may replace it.

The spec's rule (``AX3L_PROMOTION=single``, the default) promotes a run as soon as its high score
beats the golden's. The two other policies make such a run a *challenger* and run it and the
golden on more seeds, the same seeds for both, before deciding. They are one mechanism (this
module) with two rules:

* ``confirm``: one round on ``AX3L_CONFIRM_SEEDS`` seeds; the challenger is promoted when its
  mean over its 1 + R scores (the run that beat the golden included) is strictly higher than the
  golden's over the same seeds.
* ``race`` (SMAC's and irace's intensification): rounds of 1, then 2, then 4... more seeds, up to
  ``AX3L_RACE_MAX_SEEDS`` in all. After each round a one-sided paired t-test on the score
  differences (challenger - golden, seed by seed) decides: a mean difference of 0 or less stops
  the race at once (the challenger is retained), a p-value at or below ``AX3L_RACE_ALPHA``
  divided by the number of rounds that can promote (Bonferroni: the race as a whole promotes an
  equal challenger at most ``AX3L_RACE_ALPHA`` of the time) promotes it, and a race that reaches
  the seed cap without that retains it. The run that made the challenger one is left out of the
  decision: it was selected for being high, so it would bias the test (the winner's curse).
  A win needs at least ``RACE_MIN_SEEDS`` differences.

The seeds are ``seed + 1,000,000 + k`` (k = 1, 2, ...), a range no seed rotation reaches: a
rotation goes to seed + 1, + 2, ..., and a run there would make that configuration a duplicate
after the rotation. Every trial uses them in the same order, so the golden's runs from earlier
trials (or, under confirm, its seeding or rotation) are reused, not run again: no configuration
runs twice on a seed.

Exactly once, across any crash:

* The decision to hold a trial is stored first (``promotion_confirmation_started``, named by the
  challenger's run, with both configurations and the policy), then each run is looked up by its
  configuration before it is submitted through the one exactly-once submitter
  (``ax3l.shared.submit_once``, by way of ``baselines.next_baseline_run``): a restart neither
  submits a run twice nor loses one.
* Each round submits every run it needs before it waits for any: one SnakeLab queues them,
  several hosts run them at once. A race's rounds are logged (``promotion_race_round``, once per
  round: looked up before it is written); the verdict of a round is a function of its runs'
  scores, so a restart reaches the same one.
* The outcome is stored (``promotion_confirmation_decided``) before the comparison that
  completes the step, so cycles, stagnation, exhaustion and rotation see one step.

A trial run that keeps failing (the baseline bounds: ``AX3L_BASELINE_MAX_ATTEMPTS``,
``AX3L_INFRA_RETRY_MAX``) does not stop the loop: the golden is retained, and the decision says
which run failed. Seeding and a seed rotation, under ``confirm``, score the new golden on the
confirmation seeds (``baseline_fields``), so its mean is known before the first challenger; a
race runs the golden on a seed only when a race first needs it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Literal

from ax3l.orchestrator.attempts import stored_runs
from ax3l.orchestrator.baselines import BaselineFailed, next_baseline_run, wait_scored
from ax3l.orchestrator.services import Runs
from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.orchestrator.waiting import RunOutcome
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import StoredEvent, latest, select
from ax3l.shared.event_models import (
    GoldenConfigCreated,
    PromotionConfirmationDecided,
    PromotionConfirmationStarted,
    PromotionRaceRound,
    SimulationSubmitted,
)

logger = logging.getLogger(__name__)

SOURCE = "PromotionConfirmation"
RACE_SOURCE = "PromotionRace"
PURPOSE = "confirmation"
SEED_OFFSET = 1_000_000
# A race promotes on at least this many paired differences: with two, two equal positive
# differences (integer scores make them likely) would have a p-value of 0.
RACE_MIN_SEEDS = 3

Policy = Literal["single", "confirm", "race"]
Verdict = Literal["promoted", "retained"]


def confirmation_seeds(seed: int, count: int) -> list[int]:
    """The trial seeds of ``seed``: ``seed + 1,000,000 + k``, k = 1..count."""
    return [seed + SEED_OFFSET + k for k in range(1, count + 1)]


def mean(scores: list[int]) -> float:
    return sum(scores) / len(scores)


@dataclass(frozen=True)
class Promotion:
    """``AX3L_PROMOTION`` and its policies' settings (``AX3L_CONFIRM_SEEDS``,
    ``AX3L_RACE_MAX_SEEDS``, ``AX3L_RACE_ALPHA``)."""

    policy: Policy = "single"
    seeds: int = 2
    race_max_seeds: int = 8
    race_alpha: float = 0.1

    @property
    def confirm(self) -> bool:
        return self.policy == "confirm"

    @property
    def trials(self) -> bool:
        """Whether a run that beats the golden is tried on more seeds before promotion."""
        return self.policy != "single"


def race_rounds(max_seeds: int) -> list[int]:
    """How many seeds each round of a race adds: 1, 2, 4, ... until ``max_seeds`` in all."""
    sizes, total, size = [], 0, 1
    while total < max_seeds:
        sizes.append(min(size, max_seeds - total))
        total += sizes[-1]
        size *= 2
    return sizes


def race_looks(max_seeds: int) -> int:
    """The rounds of a race that can promote (those ending with ``RACE_MIN_SEEDS`` or more)."""
    ends, total = [], 0
    for size in race_rounds(max_seeds):
        total += size
        ends.append(total)
    return sum(1 for end in ends if end >= RACE_MIN_SEEDS) or 1


@dataclass(frozen=True)
class RaceVerdict:
    """A race's state after a round: its paired differences, their mean, the one-sided p-value
    (None below ``RACE_MIN_SEEDS``) and the verdict (None: another round)."""

    differences: list[int]
    mean_difference: float
    p_value: float | None
    level: float
    verdict: Verdict | None


def race_verdict(
    candidate: list[int], golden: list[int], max_seeds: int, alpha: float
) -> RaceVerdict:
    """The rule of a race over the scores so far (same seeds, same order)."""
    differences = [c - g for c, g in zip(candidate, golden, strict=True)]
    n = len(differences)
    level = alpha / race_looks(max_seeds)
    average = sum(differences) / n if n else 0.0
    p_value = paired_p_value(differences) if n >= RACE_MIN_SEEDS else None
    verdict: Verdict | None = None
    if n and average <= 0:
        verdict = "retained"
    elif p_value is not None and p_value <= level:
        verdict = "promoted"
    elif n >= max_seeds:
        verdict = "retained"
    return RaceVerdict(differences, average, p_value, level, verdict)


def paired_p_value(differences: list[int]) -> float:
    """One-sided p-value of a paired t-test that the mean difference is above 0."""
    n = len(differences)
    average = sum(differences) / n
    variance = sum((d - average) ** 2 for d in differences) / (n - 1)
    if variance == 0.0:
        return 0.0 if average > 0 else 1.0
    statistic = average / math.sqrt(variance / n)
    # Imported here: scipy.stats costs a second at start, and only races need it.
    from scipy.stats import t as student_t

    return float(student_t.sf(statistic, n - 1))


@dataclass(frozen=True)
class Scored:
    """A configuration's runs and scores on a trial's seeds, in the seeds' order."""

    runs: list[str]
    scores: list[int]

    def then(self, more: Scored) -> Scored:
        """These scores followed by ``more``'s."""
        return Scored(self.runs + more.runs, self.scores + more.scores)


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
    """The trial begun for ``run_id``, if any (it is finished whatever the setting)."""
    return await latest(db, PromotionConfirmationStarted, process_id=run_id)


async def confirm(
    runs: Runs,
    status: LoopStatus,
    promotion: Promotion,
    candidate: Candidate,
    golden_event_id: int,
    golden: GoldenConfigCreated,
) -> StoredEvent[PromotionConfirmationDecided]:
    """Try ``candidate`` against the golden on more seeds and store the decision (once); a trial
    begun under one policy is finished under it."""
    started = await started_for(runs.db, candidate.run_id)
    if started is None:
        started = await _start(runs, promotion, candidate, golden_event_id, golden)
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
            "policy": model.policy or "confirm",
            "candidate_run_id": candidate.run_id,
            "golden_run_id": model.golden_run_id,
            "seeds": [model.seed, *model.seeds],
        },
    )
    what = f"{'race' if model.policy == 'race' else 'confirmation'} of run {candidate.run_id}"
    try:
        if model.policy == "race":
            return await _race(runs, started, what)
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


async def _race(
    runs: Runs, started: StoredEvent[PromotionConfirmationStarted], what: str
) -> StoredEvent[PromotionConfirmationDecided]:
    """The rounds of a race (each logged once), then its decision; the triggering run is out."""
    model = started.model
    assert model.seeds is not None and model.candidate_config is not None
    assert model.golden_config is not None
    max_seeds = len(model.seeds)
    alpha = model.alpha if model.alpha is not None else 0.1
    candidate, golden = Scored([], []), Scored([], [])
    done = 0
    for number, size in enumerate(race_rounds(max_seeds), start=1):
        seeds = model.seeds[done : done + size]
        done += size
        candidate_on, golden_on = await score_on_seeds(
            runs,
            [model.candidate_config, model.golden_config],
            seeds,
            what=f"{what}, round {number}",
            parent_event_id=started.event_id,
        )
        candidate = Scored(
            candidate.runs + candidate_on.runs, candidate.scores + candidate_on.scores
        )
        golden = Scored(golden.runs + golden_on.runs, golden.scores + golden_on.scores)
        found = race_verdict(candidate.scores, golden.scores, max_seeds, alpha)
        await _log_round(runs, started, number, model.seeds[:done], candidate, golden, found)
        if found.verdict is not None:
            return await _decide(runs, started, candidate, golden, race=found)
    raise AssertionError(f"race {started.event_id} reached its seed cap without a verdict")


async def _log_round(
    runs: Runs,
    started: StoredEvent[PromotionConfirmationStarted],
    number: int,
    seeds: list[int],
    candidate: Scored,
    golden: Scored,
    found: RaceVerdict,
) -> None:
    """``promotion_race_round`` for round ``number`` unless a restart already logged it."""
    for earlier in await _rounds(runs.db, started.event_id):
        if earlier.model.round == number:
            return
    model = started.model
    await runs.log.log(
        PromotionRaceRound(
            candidate_run_id=model.candidate_run_id,
            golden_run_id=model.golden_run_id,
            round=number,
            seeds=seeds,
            candidate_scores=candidate.scores,
            golden_scores=golden.scores,
            candidate_runs=candidate.runs,
            golden_runs=golden.runs,
            mean_difference=round(found.mean_difference, 4),
            p_value=None if found.p_value is None else round(found.p_value, 6),
            threshold=round(found.level, 6),
            verdict=found.verdict or "continue",
        ),
        process_id=started.process_id,
        parent_event_id=started.event_id,
        parameter=model.parameter,
        source_name=RACE_SOURCE,
    )
    crash_point("race_round_logged")


async def _rounds(db: Database, started_id: int) -> list[StoredEvent[PromotionRaceRound]]:
    return await select(db, PromotionRaceRound, parent=started_id)


async def _start(
    runs: Runs,
    promotion: Promotion,
    candidate: Candidate,
    golden_event_id: int,
    golden: GoldenConfigCreated,
) -> StoredEvent[PromotionConfirmationStarted]:
    race = promotion.policy == "race"
    # Confirm's events keep the shape they had before races.
    race_fields: dict[str, Any] = {"policy": "race", "alpha": promotion.race_alpha} if race else {}
    seeds = confirmation_seeds(golden.seed, promotion.race_max_seeds if race else promotion.seeds)
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
            **race_fields,
        ),
        process_id=candidate.run_id,
        parent_event_id=candidate.ended_event_id,
        parameter=candidate.parameter,
        source_name=RACE_SOURCE if race else SOURCE,
    )
    logger.info(
        "run %s beat the golden (%s > %s): %s on seeds %s",
        candidate.run_id,
        candidate.high_score,
        golden.high_score,
        "racing it" if race else "confirming",
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
    race: RaceVerdict | None = None,
) -> StoredEvent[PromotionConfirmationDecided]:
    model = started.model
    assert model.seed is not None and model.seeds is not None
    # A confirmation's seeds start with the current one; a race's are those it used.
    seeds = [model.seed, *model.seeds]
    fields: dict[str, Any] = {"problem": problem}
    policy: dict[str, Any] = {"policy": "race"} if model.policy == "race" else {}
    won = False
    if candidate is not None and golden is not None:
        fields = {
            "candidate_scores": candidate.scores,
            "golden_scores": golden.scores,
            "candidate_runs": candidate.runs,
            "golden_runs": golden.runs,
            "candidate_mean": round(mean(candidate.scores), 4),
            "golden_mean": round(mean(golden.scores), 4),
        }
        if race is None:
            # Same number of scores on both sides: comparing sums is comparing means, exactly.
            won = sum(candidate.scores) > sum(golden.scores)
        else:
            won = race.verdict == "promoted"
            seeds = model.seeds[: len(candidate.scores)]
            fields |= {
                "mean_difference": round(race.mean_difference, 4),
                "p_value": None if race.p_value is None else round(race.p_value, 6),
                "threshold": round(race.level, 6),
            }
    await runs.log.log(
        PromotionConfirmationDecided(
            candidate_run_id=model.candidate_run_id,
            golden_run_id=model.golden_run_id,
            seeds=seeds,
            decision="promoted" if won else "retained",
            **fields,
            **policy,
        ),
        process_id=started.process_id,
        parent_event_id=started.event_id,
        parameter=model.parameter,
        source_name=RACE_SOURCE if model.policy == "race" else SOURCE,
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
    still score (an earlier trial's, reused), else the next one, recorded and submitted
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
    """The trial fields a promoted challenger's ``golden_config_created`` carries."""
    return {
        "confirmation_seeds": decided.seeds,
        "confirmation_scores": decided.candidate_scores,
        "confirmation_runs": decided.candidate_runs,
        "mean_high_score": decided.candidate_mean,
        **({"promotion_policy": decided.policy} if decided.policy == "race" else {}),
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
    seed rotation), so its mean is known before the first challenger; nothing otherwise (a race
    runs the golden on a seed when it first needs it)."""
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
