"""Reading ``ax3l-compare``'s results (``comparisons``, ``comparison_repeats``) and summarising
them per proposer with ``ax3l.shared.comparison_stats``.

A database whose tables predate the comparison (the user's three tables only) simply has no
comparison: the report server never creates tables. The records read here
(``models/comparison.py``) are also the ``/api/comparison`` reply's shapes.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ax3l.reports.models.comparison import (
    ComparisonRow,
    KindTurns,
    ProposerSummary,
    RepeatRow,
    RetestPoint,
    RetestRow,
)
from ax3l.shared import comparison_stats as stats
from ax3l.shared.db.comparisons import Comparisons, StoredComparison, StoredRepeat
from ax3l.shared.db.database import Database

BASELINE = "random"
FINITE, CONTINUOUS = "finite", "continuous"
MODEL, TPE, MATCHED = "model", "tpe", "model_matched_tpe"


def _comparison(row: StoredComparison) -> ComparisonRow:
    content = _json(row["content"])
    return ComparisonRow(
        comparison_id=int(row["comparison_id"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        state=str(row["state"]),
        proposers=[p for p in str(row["proposers"]).split(",") if p],
        repeats=int(row["repeats"]),
        budget=int(row["budget"]),
        wall_seconds=None if row["wall_seconds"] is None else float(row["wall_seconds"]),
        content=content if isinstance(content, dict) else {},
    )


def _json(text: Any) -> Any:
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


async def list_comparisons(db: Database) -> list[ComparisonRow]:
    """Every comparison, newest first (empty without the tables)."""
    return [_comparison(row) for row in await Comparisons(db).all()]


async def read_retests(db: Database, comparison_id: int) -> list[RetestRow]:
    """The comparison's held-out re-tests (none in a database from before them)."""
    found = []
    for row in await Comparisons(db).retests(comparison_id):
        failed = _json(row["failed_run_ids"])
        found.append(
            RetestRow(
                proposer=str(row["proposer"]),
                repeat_index=int(row["repeat_index"]),
                at_runs=int(row["at_runs"]),
                seed=int(row["seed"]),
                run_id=None if row["run_id"] is None else str(row["run_id"]),
                score=None if row["score"] is None else int(row["score"]),
                failed_run_ids=[str(r) for r in failed] if isinstance(failed, list) else [],
            )
        )
    return found


def has_retests(comparison: ComparisonRow) -> bool:
    """Whether the comparison re-tested its recommendations (an older one did not)."""
    retest = comparison.content.get("retest")
    return isinstance(retest, dict) and bool(retest.get("seeds"))


def retest_seeds(comparison: ComparisonRow) -> list[int]:
    retest = comparison.content.get("retest")
    seeds = retest.get("seeds") if isinstance(retest, dict) else None
    return [int(s) for s in seeds] if isinstance(seeds, list) else []


def retest_per_repeat(comparison: ComparisonRow) -> int | None:
    """How many held-out seeds each repeat had of its own; None when all shared the same."""
    retest = comparison.content.get("retest")
    count = retest.get("per_repeat") if isinstance(retest, dict) else None
    return int(count) if isinstance(count, int) and count > 0 else None


def with_verdicts(
    comparison: ComparisonRow, repeats: list[RepeatRow], retests: list[RetestRow]
) -> list[RepeatRow]:
    """Each repeat with its final recommendation's held-out scores and expected score."""
    budget = comparison.budget
    finals: dict[tuple[str, int], list[int]] = {}
    for r in retests:
        if r.at_runs == budget and r.score is not None:
            finals.setdefault((r.proposer, r.repeat_index), []).append(r.score)
    found = []
    for repeat in repeats:
        scores = finals.get((repeat.proposer, repeat.repeat_index), [])
        pick = _final_recommendation(repeat, budget)
        found.append(
            repeat.model_copy(
                update={
                    "held_out": scores,
                    "held_out_mean": stats.mean(scores) if scores else None,
                    "held_out_median": stats.median(scores) if scores else None,
                    "expected_score": _number(pick.get("expected_score")),
                    "recommendation": pick.get("config")
                    if isinstance(pick.get("config"), dict)
                    else None,
                }
            )
        )
    return found


def _final_recommendation(repeat: RepeatRow, budget: int) -> dict[str, Any]:
    for pick in repeat.recommendations:
        if isinstance(pick, dict) and pick.get("at_runs") == budget:
            return pick
    return {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def repeat_verdicts(
    comparison: ComparisonRow, repeats: list[RepeatRow]
) -> dict[str, list[stats.RepeatVerdict]]:
    """Per proposer, its finished repeats' verdicts (``with_verdicts`` rows)."""
    found: dict[str, list[stats.RepeatVerdict]] = {}
    for r in repeats:
        if r.state != "finished":
            continue
        best = stats.final_best(r.best_so_far, comparison.budget)
        found.setdefault(r.proposer, []).append(
            stats.RepeatVerdict(
                r.repeat_index,
                r.held_out,
                None if best is None else float(best),
                r.expected_score,
            )
        )
    return found


def verdict(
    comparison: ComparisonRow, repeats: list[RepeatRow]
) -> tuple[list[stats.ProposerVerdict], list[stats.PairedDifference]]:
    """The held-out verdict per proposer and the paired differences (each proposer against
    ``default`` and ``tpe``, then the pairs the comparison was asked for)."""
    verdicts = repeat_verdicts(comparison, repeats)
    names = _names(comparison, repeats)
    table = [v for name in names if (v := stats.proposer_verdict(name, verdicts.get(name, [])))]
    named = comparison.content.get("pairs")
    asked = [
        (str(p[0]), str(p[1]))
        for p in (named if isinstance(named, list) else [])
        if isinstance(p, list) and len(p) == 2
    ]
    pairs = stats.paired_table(verdicts, stats.pairs_to_compare(names, asked))
    return table, pairs


def retest_curve(proposer: str, retests: list[RetestRow], points: list[int]) -> list[RetestPoint]:
    """The IQM of the proposer's repeats' held-out means at each re-test point."""
    found = []
    for at_runs in points:
        by_repeat: dict[int, list[int]] = {}
        for r in retests:
            if r.proposer == proposer and r.at_runs == at_runs and r.score is not None:
                by_repeat.setdefault(r.repeat_index, []).append(r.score)
        means = [stats.mean(scores) for scores in by_repeat.values()]
        if means:
            estimate = stats.iqm_estimate(means)
            found.append(
                RetestPoint(
                    at_runs=at_runs,
                    repeats=len(means),
                    iqm=estimate.value,
                    low=estimate.low,
                    high=estimate.high,
                )
            )
    return found


def _names(comparison: ComparisonRow, repeats: list[RepeatRow]) -> list[str]:
    names = [*comparison.proposers]
    return names + sorted({r.proposer for r in repeats} - set(names))


async def read_repeats(db: Database, comparison_id: int) -> list[RepeatRow]:
    return [_repeat(row) for row in await Comparisons(db).repeats(comparison_id)]


def _repeat(row: StoredRepeat) -> RepeatRow:
    curve = _json(row["best_so_far"])
    content = _json(row["content"])
    content = content if isinstance(content, dict) else {}
    by_kind = _by_kind(content.get("by_kind"))
    proposed_by = _counts(content.get("proposed_by"))
    error = content.get("error")
    return RepeatRow(
        proposer=str(row["proposer"]),
        repeat_index=int(row["repeat_index"]),
        seed=int(row["seed"]),
        state=str(row["state"]),
        runs=int(row["runs"]),
        best_score=None if row["best_score"] is None else int(row["best_score"]),
        best_so_far=[
            v if isinstance(v, int) and not isinstance(v, bool) else None
            for v in (curve if isinstance(curve, list) else [])
        ],
        accepted_proposals=int(row["accepted_proposals"]),
        model_turns=int(row["model_turns"]),
        wasted_turns=int(row["wasted_turns"]),
        wall_seconds=float(row["wall_seconds"]),
        wasted_kinds=_counts(content.get("wasted_kinds")),
        by_kind=by_kind,
        wasted_per_accepted_finite=_per_accepted(by_kind, FINITE),
        wasted_per_accepted_continuous=_per_accepted(by_kind, CONTINUOUS),
        model_proposals=proposed_by.get(MODEL) if proposed_by else None,
        tpe_proposals=proposed_by.get(TPE) if proposed_by else None,
        model_matched_tpe=proposed_by.get(MATCHED) if proposed_by else None,
        error=error if isinstance(error, str) else None,
        recommendations=[r for r in content.get("recommendations", []) if isinstance(r, dict)]
        if isinstance(content.get("recommendations"), list)
        else [],
    )


def _counts(value: Any) -> dict[str, int]:
    """A stored ``{name: count}``; anything else (older rows, damage) reads as empty."""
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def _by_kind(value: Any) -> dict[str, KindTurns]:
    if not isinstance(value, dict):
        return {}
    found = {str(kind): _counts(turns) for kind, turns in value.items()}
    return {
        kind: KindTurns(accepted=turns.get("accepted", 0), wasted=turns.get("wasted", 0))
        for kind, turns in found.items()
    }


def _per_accepted(by_kind: dict[str, KindTurns], kind: str) -> float | None:
    turns = by_kind.get(kind)
    return turns.wasted / turns.accepted if turns and turns.accepted else None


def _sum_by_kind(repeats: list[RepeatRow]) -> dict[str, KindTurns]:
    kinds = sorted({kind for r in repeats for kind in r.by_kind})
    return {
        kind: KindTurns(
            accepted=sum(t.accepted for r in repeats if (t := r.by_kind.get(kind))),
            wasted=sum(t.wasted for r in repeats if (t := r.by_kind.get(kind))),
        )
        for kind in kinds
    }


def _sum_optional(values: list[int | None]) -> int | None:
    """The sum of the values that are there; None when none is (not the hybrid)."""
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def default_target(comparison: ComparisonRow, repeats: list[RepeatRow]) -> float | None:
    """The score the page asks about unless the user picks one: ``random``'s median best at
    the budget (what beating the baseline means), else every proposer's; rounded up, as
    scores are whole numbers."""
    finished = [r for r in repeats if r.state == "finished"]
    pool = [r for r in finished if r.proposer == BASELINE] or finished
    finals = [
        float(v)
        for r in pool
        if (v := stats.final_best(r.best_so_far, comparison.budget)) is not None
    ]
    return float(math.ceil(stats.median(finals))) if finals else None


def summarise(
    comparison: ComparisonRow,
    repeats: list[RepeatRow],
    target: float | None,
    retests: list[RetestRow] | None = None,
) -> list[ProposerSummary]:
    """Per proposer, in the comparison's order (then any other proposer found)."""
    budget = comparison.budget
    names = _names(comparison, repeats)
    finished_keys = {(r.proposer, r.repeat_index) for r in repeats if r.state == "finished"}
    kept = [r for r in retests or [] if (r.proposer, r.repeat_index) in finished_keys]
    points = sorted({r.at_runs for r in kept})
    finished = {n: [r for r in repeats if r.proposer == n and r.state == "finished"] for n in names}
    finals = {n: [stats.final_best(r.best_so_far, budget) for r in finished[n]] for n in names}
    summaries = []
    for name in names:
        mine = finished[name]
        curves = [r.best_so_far for r in mine]
        values = [float(v) for v in finals[name] if v is not None]
        accepted = sum(r.accepted_proposals for r in mine)
        wasted = sum(r.wasted_turns for r in mine)
        kinds: dict[str, int] = {}
        for r in mine:
            for kind, count in r.wasted_kinds.items():
                kinds[kind] = kinds.get(kind, 0) + count
        by_kind = _sum_by_kind(mine)
        walls = [r.wall_seconds for r in mine]
        beats = (
            stats.probability_of_beating(finals[name], finals[BASELINE])
            if name != BASELINE and finished.get(BASELINE)
            else None
        )
        summaries.append(
            ProposerSummary(
                proposer=name,
                repeats=len(mine),
                failed=sum(1 for r in repeats if r.proposer == name and r.state != "finished"),
                curve=stats.curve_band(curves, budget),
                final_median=stats.median(values) if values else None,
                final_low=stats.quantile(values, 0.025) if values else None,
                final_high=stats.quantile(values, 0.975) if values else None,
                p_beats_random=beats,
                median_simulations_to_target=None
                if target is None
                else stats.median_simulations_to_reach(curves, target),
                reached_target=0
                if target is None
                else sum(1 for c in curves if stats.simulations_to_reach(c, target) is not None),
                accepted_proposals=accepted,
                wasted_turns=wasted,
                wasted_per_accepted=wasted / accepted if accepted else None,
                wasted_kinds=dict(sorted(kinds.items())),
                by_kind=by_kind,
                wasted_per_accepted_finite=_per_accepted(by_kind, FINITE),
                wasted_per_accepted_continuous=_per_accepted(by_kind, CONTINUOUS),
                model_proposals=_sum_optional([r.model_proposals for r in mine]),
                tpe_proposals=_sum_optional([r.tpe_proposals for r in mine]),
                model_matched_tpe=_sum_optional([r.model_matched_tpe for r in mine]),
                median_wall_seconds=stats.median(walls) if walls else None,
                retest_curve=retest_curve(name, kept, points),
            )
        )
    return summaries
