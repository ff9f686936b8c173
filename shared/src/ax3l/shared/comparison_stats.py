"""The statistics of a proposer comparison (``ax3l-compare``, the report's ``/comparison``),
on numpy: the one quantile implementation of the tree lives here.

Each repeat of a proposer gives a best-so-far curve: after SnakeLab's k-th run (seeding is run
1), the best high score among runs 1..k, ``None`` before the first scored run. Over a
proposer's repeats:

* the **median curve** and the **95% band** are, at each k, the median and the 2.5th / 97.5th
  percentiles (numpy's ``linear`` method: interpolation between order statistics) of the
  repeats that have a score by then: the band is where 95% of the repeats lie, not a
  confidence interval of the median;
* **P(A beats B)** at the budget is the chance that a repeat of A, drawn at random, ends higher
  than one of B, a tie counting half (all pairs of repeats; the Mann-Whitney / common-language
  effect size). A repeat without any score counts as the lowest;
* the **simulations to reach** a score: per repeat the first k whose best reaches it; the median
  over repeats counts a repeat that never reached it as beyond every budget, so the median is
  ``None`` when half of the repeats or more never reached it.

The held-out verdict (``ax3l-compare --retest``) is one number per repeat, its recommendation's
mean high score on the held-out seeds. Repeat i of every proposer shares its tuning seed and
the held-out seeds, so two proposers are compared **paired**, repeat by repeat:

* the **median paired difference** of A's and B's held-out means, with a 95% percentile
  bootstrap interval (``BOOTSTRAP_RESAMPLES`` resamples of the pairs, numpy's ``Generator``
  seeded with ``BOOTSTRAP_SEED``: the same data give the same interval);
* **P(A beats B)** over repeats: the share of repeats where A's held-out mean is higher, a tie
  counting half;
* the **interquartile mean** (IQM) of one proposer's held-out means: the mean of what is left
  after dropping ``floor(n / 4)`` repeats at each end (``scipy.stats.trim_mean(x, 0.25)``), with
  its bootstrap interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Curve = Sequence[int | None]
Samples = npt.NDArray[np.float64]

BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 23
LEVEL = 0.95


def best_so_far(scores: Sequence[int | None]) -> list[int | None]:
    """The running best of a run's high scores in submission order (``None`` = no score)."""
    best: int | None = None
    curve: list[int | None] = []
    for score in scores:
        if score is not None and (best is None or score > best):
            best = score
        curve.append(best)
    return curve


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1), numpy's ``linear`` method (between order statistics)."""
    if len(values) == 0:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside 0..1")
    return float(np.quantile(np.asarray(values, dtype=float), q))


def median(values: Sequence[float]) -> float:
    return quantile(values, 0.5)


@dataclass(frozen=True)
class CurvePoint:
    """The repeats' best-so-far after ``simulations`` runs."""

    simulations: int
    median: float
    low: float  # 2.5th percentile
    high: float  # 97.5th percentile
    repeats: int  # repeats with a score by then


def curve_band(curves: Sequence[Curve], budget: int) -> list[CurvePoint]:
    """Median and 95% band at each run count 1..budget (counts without any score are left out).

    A repeat shorter than ``budget`` (stopped early) keeps its last value: its best cannot drop.
    """
    points = []
    for k in range(1, budget + 1):
        values = [float(v) for c in curves if (v := _at(c, k)) is not None]
        if values:
            points.append(
                CurvePoint(
                    k, median(values), quantile(values, 0.025), quantile(values, 0.975), len(values)
                )
            )
    return points


def _at(curve: Curve, k: int) -> int | None:
    """The curve's value after ``k`` runs (its last value when it is shorter)."""
    if not curve:
        return None
    return curve[min(k, len(curve)) - 1]


def final_best(curve: Curve, budget: int) -> int | None:
    return _at(curve, budget)


def probability_of_beating(
    ours: Sequence[int | None], theirs: Sequence[int | None]
) -> float | None:
    """P(a random one of ``ours`` > a random one of ``theirs``), ties half; None without pairs."""
    if not ours or not theirs:
        return None
    low = -math.inf
    wins = 0.0
    for a in ours:
        for b in theirs:
            left = low if a is None else a
            right = low if b is None else b
            wins += 1.0 if left > right else 0.5 if left == right else 0.0
    return wins / (len(ours) * len(theirs))


def simulations_to_reach(curve: Curve, target: float) -> int | None:
    """The first run count whose best-so-far reaches ``target`` (None: never)."""
    for k, value in enumerate(curve, start=1):
        if value is not None and value >= target:
            return k
    return None


def median_simulations_to_reach(curves: Sequence[Curve], target: float) -> float | None:
    """The median over repeats of the runs needed to reach ``target``; a repeat that never did
    counts as needing more runs than any curve has, so the result is None when half or more
    never reached it."""
    if not curves:
        return None
    beyond = float(max(len(c) for c in curves) + 1)
    needed = [
        beyond if (k := simulations_to_reach(c, target)) is None else float(k) for c in curves
    ]
    value = median(needed)
    return None if value > beyond - 1 else value


# -- the held-out verdict: paired statistics over repeats ------------------------------------

Statistic = Callable[[Samples], Samples]  # one value per row of a (resamples, n) array


def _median_rows(rows: Samples) -> Samples:
    return np.median(rows, axis=1)


def _iqm_rows(rows: Samples) -> Samples:
    n = rows.shape[1]
    cut = n // 4
    means: Samples = np.sort(rows, axis=1)[:, cut : n - cut].mean(axis=1)
    return means


def iqm(values: Sequence[float]) -> float:
    """The interquartile mean: the mean after dropping ``floor(n / 4)`` values at each end."""
    if len(values) == 0:
        raise ValueError("IQM of no values")
    return float(_iqm_rows(np.asarray(values, dtype=float)[None, :])[0])


@dataclass(frozen=True)
class Estimate:
    """A statistic of ``n`` values with its 95% percentile bootstrap interval."""

    value: float
    low: float
    high: float
    n: int


def bootstrap(
    values: Sequence[float],
    statistic: Statistic,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Estimate:
    """``statistic`` of ``values`` and the 2.5th/97.5th percentiles of it over ``resamples``
    resamples with replacement (all drawn at once from a ``Generator`` seeded with ``seed``)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap of no values")
    rng = np.random.default_rng(seed)
    rows = data[rng.integers(0, data.size, size=(resamples, data.size))]
    spread = statistic(rows)
    tail = (1.0 - LEVEL) / 2
    low, high = np.quantile(spread, [tail, 1.0 - tail])
    return Estimate(float(statistic(data[None, :])[0]), float(low), float(high), int(data.size))


def iqm_estimate(values: Sequence[float], **options: int) -> Estimate:
    """The IQM of ``values`` with its bootstrap interval."""
    return bootstrap(values, _iqm_rows, **options)


@dataclass(frozen=True)
class PairedDifference:
    """A against B over the repeats both have a verdict for (paired by repeat index)."""

    a: str
    b: str
    repeats: int
    median_difference: float  # A - B
    low: float
    high: float
    p_a_beats_b: float  # share of repeats where A is higher, ties half


def paired_difference(
    a: str, ours: Mapping[int, float], b: str, theirs: Mapping[int, float], **options: int
) -> PairedDifference | None:
    """The median of ``ours[i] - theirs[i]`` with its bootstrap interval and P(A beats B), over
    the repeat indices in both; None without any."""
    common = sorted(set(ours) & set(theirs))
    if not common:
        return None
    differences = [ours[i] - theirs[i] for i in common]
    found = bootstrap(differences, _median_rows, **options)
    wins = sum(1.0 if d > 0 else 0.5 if d == 0 else 0.0 for d in differences)
    return PairedDifference(
        a, b, len(common), found.value, found.low, found.high, wins / len(common)
    )


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None when either side is
    constant or there are fewer than two pairs."""
    if len(x) != len(y):
        raise ValueError("spearman needs pairs")
    if len(x) < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: Sequence[float]) -> Samples:
    """1-based ranks, tied values sharing the mean of their ranks."""
    data = np.asarray(values, dtype=float)
    order = np.argsort(data, kind="mergesort")
    ranks = np.empty(data.size)
    ranks[order] = np.arange(1, data.size + 1)
    for value in np.unique(data):
        tied = data == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def mean(values: Sequence[float]) -> float:
    if len(values) == 0:
        raise ValueError("mean of no values")
    return float(np.mean(np.asarray(values, dtype=float)))


# -- the verdict table: one proposer's repeats, and the pairs ---------------------------------

CONTROL = "default"  # ax3l-compare's untuned control arm
REFERENCES = (CONTROL, "tpe")  # every proposer is paired with these


@dataclass(frozen=True)
class RepeatVerdict:
    """One repeat's verdict: its final recommendation's held-out scores, the best score it
    observed while tuning, and (surrogate only) the recommendation's expected score."""

    repeat: int
    held_out: Sequence[int]
    best_observed: float | None
    expected_score: float | None = None

    @property
    def held_out_mean(self) -> float:
        return mean([float(v) for v in self.held_out])

    @property
    def held_out_median(self) -> float:
        return median([float(v) for v in self.held_out])


@dataclass(frozen=True)
class ProposerVerdict:
    """A proposer's repeats with a held-out verdict, summarised."""

    proposer: str
    repeats: int
    iqm: Estimate  # IQM of the repeats' held-out means, with its bootstrap interval
    held_out_mean: float  # mean over repeats of the held-out means
    held_out_median: float  # median over repeats of the held-out means
    best_observed: float | None  # mean over repeats of the best observed score
    optimism_gap: float | None  # mean over repeats of best observed - held-out mean
    expected_score: float | None  # mean over repeats of the expected score (surrogate)


def proposer_verdict(proposer: str, repeats: Sequence[RepeatVerdict]) -> ProposerVerdict | None:
    """None when no repeat has held-out scores."""
    scored = [r for r in repeats if r.held_out]
    if not scored:
        return None
    means = [r.held_out_mean for r in scored]
    observed = [r for r in scored if r.best_observed is not None]
    expected = [r.expected_score for r in scored if r.expected_score is not None]
    return ProposerVerdict(
        proposer=proposer,
        repeats=len(scored),
        iqm=iqm_estimate(means),
        held_out_mean=mean(means),
        held_out_median=median(means),
        best_observed=mean([float(r.best_observed or 0) for r in observed]) if observed else None,
        optimism_gap=mean([float(r.best_observed or 0) - r.held_out_mean for r in observed])
        if observed
        else None,
        expected_score=mean(expected) if len(expected) == len(scored) else None,
    )


def pairs_to_compare(
    proposers: Sequence[str], named: Sequence[tuple[str, str]] = ()
) -> list[tuple[str, str]]:
    """Every proposer against each reference present (``default``, ``tpe``), then the named
    pairs; each unordered pair once."""
    found: list[tuple[str, str]] = []
    seen: set[frozenset[str]] = set()
    candidates = [(a, b) for b in REFERENCES if b in proposers for a in proposers if a != b]
    for a, b in [*candidates, *named]:
        if a in proposers and b in proposers and a != b and frozenset((a, b)) not in seen:
            seen.add(frozenset((a, b)))
            found.append((a, b))
    return found


def paired_table(
    verdicts: Mapping[str, Sequence[RepeatVerdict]], pairs: Sequence[tuple[str, str]]
) -> list[PairedDifference]:
    """The paired difference of held-out means for each pair that shares a repeat."""
    by_index = {
        p: {r.repeat: r.held_out_mean for r in repeats if r.held_out}
        for p, repeats in verdicts.items()
    }
    return [
        pair
        for a, b in pairs
        if (pair := paired_difference(a, by_index.get(a, {}), b, by_index.get(b, {}))) is not None
    ]
