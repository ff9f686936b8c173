"""The race's rule (``AX3L_PROMOTION=race``) on scripted scores: how often it promotes an equal
challenger and a better one, drawn many times."""

from __future__ import annotations

import random

import pytest

from ax3l.orchestrator.racing import (
    RACE_MIN_SEEDS,
    paired_p_value,
    race_looks,
    race_rounds,
    race_verdict,
)

DRAWS = 4000


def test_rounds_double_up_to_the_cap() -> None:
    """1, then 2, then 4 more seeds, the last round cut to the cap."""
    assert race_rounds(8) == [1, 2, 4, 1]
    assert race_rounds(7) == [1, 2, 4]
    assert race_rounds(3) == [1, 2]
    assert race_rounds(16) == [1, 2, 4, 8, 1]
    # Rounds that can promote end at 3 seeds or more: 3, 7 and 8 of the default 8.
    assert race_looks(8) == 3 and race_looks(3) == 1


def _score(rng: random.Random, mean: float) -> int:
    """A SnakeLab-like high score: about 10% relative noise, rare collapses."""
    if rng.random() < 0.015:
        return max(1, round(mean * rng.uniform(0.03, 0.45)))
    return max(0, round(rng.gauss(mean, 0.1 * mean)))


def _race(rng: random.Random, golden: float, challenger: float, cap: int, alpha: float) -> str:
    """A race as the loop runs one: only for a challenger whose first run beat the golden's,
    that run left out; rounds of 1, 2, 4... seeds."""
    while _score(rng, challenger) <= _score(rng, golden):
        pass  # no race: the golden's run was not beaten
    ours: list[int] = []
    theirs: list[int] = []
    for size in race_rounds(cap):
        for _ in range(size):
            ours.append(_score(rng, challenger))
            theirs.append(_score(rng, golden))
        verdict = race_verdict(ours, theirs, cap, alpha).verdict
        if verdict is not None:
            return verdict
    raise AssertionError("a race ended without a verdict")


@pytest.mark.parametrize("alpha", [0.1, 0.05])
def test_an_equal_challenger_is_promoted_at_most_alpha_of_the_time(alpha: float) -> None:
    """Equal in truth, many draws: the promotion rate stays at or below AX3L_RACE_ALPHA, with a
    binomial margin."""
    rng = random.Random(7)
    promoted = sum(_race(rng, 40.0, 40.0, 8, alpha) == "promoted" for _ in range(DRAWS))
    rate = promoted / DRAWS
    margin = 2.5 * (alpha * (1 - alpha) / DRAWS) ** 0.5
    assert rate <= alpha + margin, rate


def test_a_clearly_better_challenger_is_promoted_within_the_cap() -> None:
    """Twelve points better (30% on a 40-point golden): promoted in most races. Not all: a
    collapsed run (1.5% of runs here, 16 runs in a full race) costs the challenger its race,
    which the rule accepts (it errs towards keeping the golden)."""
    rng = random.Random(8)
    promoted = sum(_race(rng, 40.0, 52.0, 8, 0.1) == "promoted" for _ in range(500))
    assert promoted >= 0.8 * 500, promoted
    no_collapse = random.Random(9)
    clean = 0
    for _ in range(200):
        ours = [round(no_collapse.gauss(52, 5.2)) for _ in range(8)]
        theirs = [round(no_collapse.gauss(40, 4.0)) for _ in range(8)]
        clean += race_verdict(ours[:7], theirs[:7], 8, 0.1).verdict == "promoted"
    assert clean >= 0.97 * 200, clean


def test_a_loser_stops_as_soon_as_its_mean_difference_is_not_positive() -> None:
    """One seed behind: retained after the first round; ahead but unproven: another round."""
    assert race_verdict([38], [40], 8, 0.1).verdict == "retained"
    assert race_verdict([40], [40], 8, 0.1).verdict == "retained"
    more = race_verdict([42], [40], 8, 0.1)
    assert more.verdict is None and more.p_value is None


def test_a_win_needs_three_seeds_and_the_split_level() -> None:
    """Two equal positive differences promote nothing; at three seeds the p-value must reach
    alpha / 3 (the rounds that can promote); at the cap an unproven lead is retained."""
    assert race_verdict([45, 45], [40, 40], 8, 0.1).verdict is None
    assert RACE_MIN_SEEDS == 3
    close = race_verdict([44, 41, 43], [40, 40, 40], 8, 0.1)
    assert close.p_value is not None and close.level == pytest.approx(0.1 / 3)
    assert (close.verdict == "promoted") == (close.p_value <= 0.1 / 3)
    capped = race_verdict([41, 39, 42, 38, 41, 40, 42, 39], [40] * 8, 8, 0.1)
    assert capped.verdict == "retained"


def test_the_p_value_is_a_one_sided_paired_t_test() -> None:
    """Against scipy's own paired test (alternative greater)."""
    from scipy.stats import ttest_1samp

    differences = [3, -1, 4, 2, 0, 5]
    expected = ttest_1samp(differences, 0.0, alternative="greater").pvalue
    assert paired_p_value(differences) == pytest.approx(expected)
    assert paired_p_value([2, 2, 2]) == 0.0 and paired_p_value([-2, -2, -2]) == 1.0
