"""``ax3l-compare``'s repeated experiments: a comparison, its repeats, per proposer summaries."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ax3l.reports.models.events import RefreshQuery
from ax3l.reports.models.parameters import QueryModel
from ax3l.shared import comparison_stats as stats


class ComparisonQuery(QueryModel):
    comparison: int | None = Field(
        None, ge=1, description="the comparison's id (default: the latest)"
    )
    target: float | None = Field(
        None,
        ge=0,
        le=1_000_000,
        description="the score for 'simulations to reach' (default: random's median best)",
    )


class ComparisonPageQuery(ComparisonQuery, RefreshQuery):
    """The comparison page adds its refresh selector."""


class ComparisonRow(BaseModel):
    """One run of ``ax3l-compare`` (a row of ``comparisons``)."""

    model_config = ConfigDict(frozen=True)

    comparison_id: int
    started_at: datetime
    finished_at: datetime | None
    state: str = Field(description="running, finished, partial (a repeat failed) or failed")
    proposers: list[str]
    repeats: int = Field(description="repeats asked for per proposer")
    budget: int = Field(description="SnakeLab runs per repeat, the seeding run included")
    wall_seconds: float | None = Field(description="wall time of the whole comparison")
    content: dict[str, Any] = Field(
        default_factory=dict, description="seeds, parallelism, model server and settings"
    )


class KindTurns(BaseModel):
    """Accepted proposals and wasted turns on entries of one kind."""

    model_config = ConfigDict(frozen=True)

    accepted: int = 0
    wasted: int = 0


BY_KIND = (
    "accepted proposals and wasted turns by the kind of their entry: finite (the registry"
    " lists its choices), continuous, unknown (a wasted turn naming no entry)"
)
PER_FINITE = "wasted turns per accepted proposal on finite entries; null without any accepted"
PER_CONTINUOUS = (
    "wasted turns per accepted proposal on continuous entries; null without any accepted"
)
MODEL_PROPOSALS = "llm+tpe: accepted proposals the model made; null for other proposers"
TPE_PROPOSALS = "llm+tpe: accepted proposals TPE made (also as the model's fallback)"
MATCHED_PROPOSALS = "llm+tpe: the model's accepted proposals equal to a suggestion of TPE's advice"


class RepeatRow(BaseModel):
    """One repeat of a comparison (a row of ``comparison_repeats`` with its content)."""

    model_config = ConfigDict(frozen=True)

    proposer: str
    repeat_index: int
    seed: int
    state: str
    runs: int
    best_score: int | None
    best_so_far: list[int | None]
    accepted_proposals: int
    model_turns: int
    wasted_turns: int = Field(description="rejected proposals and failed model requests")
    wall_seconds: float
    wasted_kinds: dict[str, int] = Field(default_factory=dict)
    by_kind: dict[str, KindTurns] = Field(default_factory=dict, description=BY_KIND)
    wasted_per_accepted_finite: float | None = Field(None, description=PER_FINITE)
    wasted_per_accepted_continuous: float | None = Field(None, description=PER_CONTINUOUS)
    model_proposals: int | None = Field(None, description=MODEL_PROPOSALS)
    tpe_proposals: int | None = Field(None, description=TPE_PROPOSALS)
    model_matched_tpe: int | None = Field(None, description=MATCHED_PROPOSALS)
    error: str | None = None
    held_out: list[int] = Field(
        default_factory=list,
        description="the final recommendation's high scores on the held-out seeds, in seed"
        " order (empty without re-tests)",
    )
    held_out_mean: float | None = Field(None, description="the repeat's verdict")
    held_out_median: float | None = None
    expected_score: float | None = Field(
        None,
        description="the surrogate's noise-free expected high score of the final"
        " recommendation (surrogate only: a real SnakeLab has no such figure)",
    )
    recommendation: dict[str, Any] | None = Field(
        None, description="the final recommendation (its golden configuration)"
    )
    recommendations: list[dict[str, Any]] = Field(
        default_factory=list,
        description="each re-tested recommendation: at_runs, golden_run_id, config, expected_score",
    )


class RetestRow(BaseModel):
    """One held-out re-test (a row of ``comparison_retests``)."""

    model_config = ConfigDict(frozen=True)

    proposer: str
    repeat_index: int
    at_runs: int = Field(description="the recommendation after this many runs was re-tested")
    seed: int = Field(description="the held-out seed")
    run_id: str | None = Field(description="the run that counts")
    score: int | None
    failed_run_ids: list[str] = Field(description="runs of this seed that failed and ran again")


class RetestPoint(BaseModel):
    """The held-out means of a proposer's repeats after ``at_runs`` runs."""

    model_config = ConfigDict(frozen=True)

    at_runs: int
    repeats: int
    iqm: float
    low: float = Field(description="2.5th percentile of the IQM's bootstrap")
    high: float = Field(description="97.5th percentile of the IQM's bootstrap")


class ProposerSummary(BaseModel):
    """One proposer's repeats of a comparison, summarised (finished repeats only)."""

    model_config = ConfigDict(frozen=True)

    proposer: str
    repeats: int = Field(description="finished repeats")
    failed: int
    curve: list[stats.CurvePoint] = Field(
        description="per run count: the median best-so-far, its 2.5th (low) and 97.5th (high)"
        " percentile over repeats, and the repeats with a score by then"
    )
    final_median: float | None = Field(description="median best at the budget")
    final_low: float | None
    final_high: float | None
    p_beats_random: float | None = Field(
        description="P(a repeat of it ends above one of random's), ties half"
    )
    median_simulations_to_target: float | None = Field(
        description="median runs to reach `target`; null when half the repeats never did"
    )
    reached_target: int = Field(description="repeats that reached `target`")
    accepted_proposals: int
    wasted_turns: int = Field(description="rejected proposals and failed model requests")
    wasted_per_accepted: float | None
    wasted_kinds: dict[str, int]
    by_kind: dict[str, KindTurns] = Field(description=BY_KIND)
    wasted_per_accepted_finite: float | None = Field(description=PER_FINITE)
    wasted_per_accepted_continuous: float | None = Field(description=PER_CONTINUOUS)
    model_proposals: int | None = Field(description=MODEL_PROPOSALS)
    tpe_proposals: int | None = Field(description=TPE_PROPOSALS)
    model_matched_tpe: int | None = Field(description=MATCHED_PROPOSALS)
    median_wall_seconds: float | None
    retest_curve: list[RetestPoint] = Field(
        default_factory=list,
        description="held-out IQM with its bootstrap interval at each re-test point (--retest-at)",
    )


VERDICT = (
    "per proposer with re-tests: IQM of the repeats' held-out means with its 95% bootstrap"
    " interval (iqm.value, iqm.low, iqm.high), their mean and median, the mean best observed"
    " score, the optimism gap (best observed - held-out mean, averaged over repeats) and the"
    " mean expected score (surrogate only)"
)
PAIRS = (
    "A against B repeat by repeat: the median paired difference of held-out means (A - B) with"
    " its 95% bootstrap interval, and P(A beats B) over repeats, ties half"
)


class ComparisonOut(BaseModel):
    comparison: ComparisonRow | None
    comparisons: list[int] = Field(description="every comparison's id, newest first")
    target: float | None
    has_retests: bool = Field(
        False,
        description="false for a comparison run before held-out re-tests (or with --retest 0):"
        " it has only the observed-best figures",
    )
    retest_seeds: list[int] = Field(default_factory=list, description="the held-out seeds")
    retest_per_repeat: int | None = Field(
        None,
        description="held-out seeds of each repeat's own (shared by its arms); None: every"
        " repeat used the same seeds (comparisons before per-repeat seeds)",
    )
    verdict: list[stats.ProposerVerdict] = Field(default_factory=list, description=VERDICT)
    pairs: list[stats.PairedDifference] = Field(default_factory=list, description=PAIRS)
    proposers: list[ProposerSummary]
    repeats: list[RepeatRow]
    retests: list[RetestRow] = Field(default_factory=list)
