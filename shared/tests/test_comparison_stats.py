"""The statistics of a proposer comparison: best-so-far, median and band, P(beat), runs to reach."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from ax3l.shared import comparison_stats as stats


def test_best_so_far_is_the_running_best_and_skips_runs_without_a_score():
    """Before the first scored run the curve is None; it never drops."""
    assert stats.best_so_far([None, 30, 28, None, 41, 40]) == [None, 30, 30, 30, 41, 41]
    assert stats.best_so_far([]) == []


def test_median_and_quantiles_interpolate_like_numpy_linear():
    """Median of an even count is the midpoint; 2.5%/97.5% interpolate between order statistics."""
    values = [float(v) for v in (40, 35, 45, 38, 42, 37, 41, 39, 44, 36)]
    assert stats.median(values) == statistics.median(values)
    ordered = sorted(values)
    # position 0.025 * 9 = 0.225 between the two lowest; 0.975 * 9 = 8.775 between the highest
    assert stats.quantile(values, 0.025) == pytest.approx(
        ordered[0] + 0.225 * (ordered[1] - ordered[0])
    )
    assert stats.quantile(values, 0.975) == pytest.approx(
        ordered[8] + 0.775 * (ordered[9] - ordered[8])
    )
    assert stats.quantile([7.0], 0.975) == 7.0
    with pytest.raises(ValueError):
        stats.quantile([], 0.5)


def test_curve_band_at_each_run_count_leaves_out_repeats_without_a_score_yet():
    """The band at k is over the repeats scored by then; a short repeat keeps its last value."""
    curves = [[None, 30, 35], [20, 25, 40], [10, 10]]
    band = stats.curve_band(curves, 3)
    assert [(p.simulations, p.repeats) for p in band] == [(1, 2), (2, 3), (3, 3)]
    assert band[0].median == 15.0
    assert band[2].median == 35.0  # 35, 40 and the short repeat's 10
    assert band[2].low == pytest.approx(10 + 0.05 * 25) and band[2].high == pytest.approx(
        35 + 0.95 * 5
    )
    assert stats.curve_band([[None, None]], 2) == []


def test_probability_of_beating_counts_every_pair_with_ties_half():
    """P(A > B) over all pairs equals a brute-force count, ties half, no score the lowest."""
    assert stats.probability_of_beating([50], [40]) == 1.0
    assert stats.probability_of_beating([40], [40]) == 0.5
    assert stats.probability_of_beating([None], [1]) == 0.0
    assert stats.probability_of_beating([], [1]) is None
    rng = random.Random(5)
    ours = [rng.randint(35, 45) for _ in range(10)]
    theirs = [rng.randint(35, 45) for _ in range(10)]
    pairs = list(itertools.product(ours, theirs))
    expected = (sum(a > b for a, b in pairs) + 0.5 * sum(a == b for a, b in pairs)) / len(pairs)
    assert stats.probability_of_beating(ours, theirs) == pytest.approx(expected)
    assert stats.probability_of_beating(ours, theirs) + stats.probability_of_beating(
        theirs, ours
    ) == pytest.approx(1.0)


def test_median_runs_to_reach_counts_repeats_that_never_reached_as_beyond_the_budget():
    """The median is None once half of the repeats never reached the score."""
    curves = [[30, 40, 45], [44, 44, 44], [None, 20, 46], [10, 10, 10]]
    assert [stats.simulations_to_reach(c, 45) for c in curves] == [3, None, 3, None]
    assert stats.median_simulations_to_reach(curves, 45) is None  # 3, 3, inf, inf
    assert stats.median_simulations_to_reach(curves[:3], 45) == 3.0  # 3, 3, inf
    assert stats.median_simulations_to_reach(curves, 40) == 2.5  # 1, 2, 3, inf
    assert stats.median_simulations_to_reach([], 40) is None
