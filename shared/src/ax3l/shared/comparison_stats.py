"""The statistics of a proposer comparison (``ax3l-compare``, the report's ``/comparison``).

Each repeat of a proposer gives a best-so-far curve: after SnakeLab's k-th run (seeding is run
1), the best high score among runs 1..k, ``None`` before the first scored run. Over a
proposer's repeats:

* the **median curve** and the **95% band** are, at each k, the median and the 2.5th / 97.5th
  percentiles (linear interpolation between order statistics, numpy's default) of the repeats
  that have a score by then: the band is where 95% of the repeats lie, not a confidence
  interval of the median;
* **P(A beats B)** at the budget is the chance that a repeat of A, drawn at random, ends higher
  than one of B, a tie counting half (all pairs of repeats; the Mann-Whitney / common-language
  effect size). A repeat without any score counts as the lowest;
* the **simulations to reach** a score: per repeat the first k whose best reaches it; the median
  over repeats counts a repeat that never reached it as beyond every budget, so the median is
  ``None`` when half of the repeats or more never reached it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Curve = Sequence[int | None]


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
    """The ``q`` quantile (0..1) with linear interpolation between order statistics."""
    if not values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside 0..1")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    fraction = position - low
    if fraction == 0:
        return ordered[low]  # exact: also right when the next value is infinite
    return ordered[low] + (ordered[low + 1] - ordered[low]) * fraction


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
    counts as infinitely many, so the result is None when half or more never reached it."""
    if not curves:
        return None
    needed = [
        math.inf if (k := simulations_to_reach(c, target)) is None else float(k) for c in curves
    ]
    value = median(needed)
    return None if math.isinf(value) or math.isnan(value) else value
