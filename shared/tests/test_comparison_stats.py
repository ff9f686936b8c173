"""The statistics of a proposer comparison: best-so-far, median and band, P(beat), runs to reach."""

from __future__ import annotations

import itertools
import random
import statistics

import numpy as np
import pytest

import ax3l.shared.comparison_stats as stats


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
    with pytest.raises(ValueError, match="no values"):
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


# -- the held-out verdict's paired statistics, checked against values worked out by hand or by a
# plain-Python loop over the same data (no numpy in the expected values but the draws) --------

HELD_OUT_A = {0: 41.2, 1: 39.0, 2: 44.6, 3: 40.4, 4: 38.8, 5: 43.0, 6: 42.2, 7: 39.6}
HELD_OUT_B = {0: 39.2, 1: 39.0, 2: 40.2, 3: 41.0, 4: 37.8, 5: 40.0, 6: 39.2, 7: 39.2}


def test_iqm_drops_a_quarter_at_each_end():
    """n = 8 keeps the middle four; n = 10 drops two at each end; n = 3 drops nothing."""
    assert stats.iqm([1, 2, 3, 4, 5, 6, 7, 100]) == 4.5  # (3 + 4 + 5 + 6) / 4
    assert stats.iqm([float(v) for v in range(10)]) == pytest.approx(4.5)  # 2..7
    assert stats.iqm([1.0, 2.0, 9.0]) == 4.0
    with pytest.raises(ValueError, match="no values"):
        stats.iqm([])


def test_paired_difference_on_a_fixed_data_set():
    """Differences A - B: 2.0, 0, 4.4, -0.6, 1.0, 3.0, 3.0, 0.4; their median is 1.5; A is
    higher in 6 repeats, tied in 1, lower in 1: P = 6.5 / 8."""
    found = stats.paired_difference("a", HELD_OUT_A, "b", HELD_OUT_B)
    assert found is not None
    assert found.repeats == 8
    assert found.median_difference == pytest.approx(1.5)
    assert found.p_a_beats_b == pytest.approx(6.5 / 8)
    assert found.low <= found.median_difference <= found.high
    reverse = stats.paired_difference("b", HELD_OUT_B, "a", HELD_OUT_A)
    assert reverse is not None and reverse.p_a_beats_b == pytest.approx(1.5 / 8)
    assert stats.paired_difference("a", {0: 1.0}, "b", {1: 1.0}) is None


def _loop_interval(values, statistic, resamples, seed):
    """The percentile bootstrap interval, one resample at a time, percentiles by hand."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(values), size=(resamples, len(values)))
    spread = sorted(statistic([values[j] for j in row]) for row in draws)

    def percentile(q):
        position = q * (len(spread) - 1)
        low = int(position)
        return spread[low] + (spread[min(low + 1, len(spread) - 1)] - spread[low]) * (
            position - low
        )

    return percentile(0.025), percentile(0.975)


def _plain_iqm(values):
    ordered = sorted(values)
    cut = len(ordered) // 4
    kept = ordered[cut : len(ordered) - cut]
    return sum(kept) / len(kept)


def test_bootstrap_intervals_match_a_plain_loop_and_are_reproducible():
    """The median-difference and IQM intervals equal a one-resample-at-a-time computation over
    the same seeded draws; the same call twice gives the same interval; at least 2,000
    resamples."""
    assert stats.BOOTSTRAP_RESAMPLES >= 2000
    differences = [HELD_OUT_A[i] - HELD_OUT_B[i] for i in sorted(HELD_OUT_A)]
    found = stats.paired_difference("a", HELD_OUT_A, "b", HELD_OUT_B)
    low, high = _loop_interval(
        differences, statistics.median, stats.BOOTSTRAP_RESAMPLES, stats.BOOTSTRAP_SEED
    )
    assert (found.low, found.high) == (pytest.approx(low), pytest.approx(high))
    values = list(HELD_OUT_A.values())
    estimate = stats.iqm_estimate(values)
    assert estimate.value == pytest.approx(_plain_iqm(values))
    low, high = _loop_interval(values, _plain_iqm, stats.BOOTSTRAP_RESAMPLES, stats.BOOTSTRAP_SEED)
    assert (estimate.low, estimate.high) == (pytest.approx(low), pytest.approx(high))
    assert stats.iqm_estimate(values) == estimate
    assert estimate.low < estimate.value < estimate.high


def test_spearman_uses_average_ranks_for_ties():
    """Perfect order is 1, reversed -1; ties share ranks (worked by hand); constant is None."""
    assert stats.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert stats.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # x ranks 1, 2.5, 2.5, 4; y ranks 1, 2, 3, 4: r = 4.5 / sqrt(4.5 * 5)
    assert stats.spearman([1, 2, 2, 3], [5, 6, 7, 8]) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)
    assert stats.spearman([1, 1, 1], [1, 2, 3]) is None
    assert stats.spearman([1], [2]) is None
