"""The model of every run on synthetic runs whose truth is known."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence

import pytest

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.registry import SCALES, TUNED_PATHS
from ax3l.shared.run_model import (
    MIN_RUNS,
    Dimension,
    Estimate,
    Refitter,
    RunModel,
    RunRecord,
    Space,
    TooFewRuns,
    expected_improvement,
    records_from_rows,
)

SCHEMA = cached_schema()
SPACE = Space(SCHEMA)
DEFAULT = SPACE.values_of(SCHEMA.default_config())
BATCH = TUNED_PATHS.index("training.batch_size")
GAMMA = TUNED_PATHS.index("training.gamma")


def one_factor_runs(
    truth: Callable[[Sequence[float]], float], count: int, seed: int, noise: float = 3.5
) -> list[RunRecord]:
    """Runs as the loop makes them: the default with one value changed, on three seeds whose
    offsets are -2, 0 and +2, with Gaussian noise."""
    rng = random.Random(seed)
    runs = []
    for i in range(count):
        values = list(DEFAULT)
        at = rng.randrange(len(values))
        values[at] = rng.choice(SPACE.dimensions[at].grid(12))
        run_seed = 1970 + i % 3
        score = truth(values) + 2.0 * (run_seed - 1971) + rng.gauss(0.0, noise)
        runs.append(RunRecord(f"run-{i}", tuple(values), run_seed, score))
    return runs


def batch_matters(values: Sequence[float]) -> float:
    """Twelve points more from the smallest to the largest batch (on its log scale)."""
    return 34.0 + 12.0 * SPACE.dimensions[BATCH].unit(values[BATCH])


def test_scales_are_declared_for_every_tuned_value_and_map_the_legal_range_to_0_1() -> None:
    """The registry declares a scale per tuned path; the ends of the legal range are 0 and 1 and
    a log scale puts the geometric middle at 0.5."""
    assert set(SCALES) == set(TUNED_PATHS)
    for dim in SPACE.dimensions:
        assert dim.unit(dim.low) == pytest.approx(0.0) and dim.unit(dim.high) == pytest.approx(1.0)
    batch = SPACE.dimensions[BATCH]
    assert batch.scale == "log" and batch.unit((8 * 64) ** 0.5) == pytest.approx(0.5)
    gamma = Dimension("training.gamma", 0.9, 0.99, "log_complement")
    # 1 - gamma from 0.1 to 0.01: its geometric middle is halfway.
    assert gamma.unit(1 - 0.1 / 10**0.5) == pytest.approx(0.5)
    assert gamma.grid(3) == pytest.approx([0.9, 1 - 0.1 / 10**0.5, 0.99])


def test_the_model_recovers_a_known_effect_and_leaves_the_others_flat() -> None:
    """Batch size's effect curve rises by about the truth's twelve points; gamma, which does
    nothing, stays within a point or so."""
    model = RunModel(SPACE, one_factor_runs(batch_matters, 120, seed=1, noise=2.5))
    batch_values = SPACE.dimensions[BATCH].grid(5)
    curve = model.effect("training.batch_size", DEFAULT, batch_values)
    rise = curve[-1].mean - curve[0].mean
    assert 7.0 < rise < 17.0, [round(e.mean, 2) for e in curve]
    assert all(b.mean >= a.mean - 0.5 for a, b in itertools.pairwise(curve))
    gamma = model.effect("training.gamma", DEFAULT, SPACE.dimensions[GAMMA].grid(5))
    assert max(e.mean for e in gamma) - min(e.mean for e in gamma) < 2.0
    # The seed offsets (+-2 points) are the seed's, not noise in the configurations.
    assert 0.8 < model.fitted.seed_sd < 4.0, model.fitted
    assert 2.0 < model.fitted.noise_sd < 5.0, model.fitted


def test_the_best_predicted_mean_beats_the_luckiest_single_run() -> None:
    """Over several experiments, the configuration the model recommends is truly better than
    the one whose single run scored highest (the winner's curse), and never one without runs;
    its sd is below the noise of one run."""
    recommended, luckiest = [], []
    for seed in range(10, 16):
        runs = one_factor_runs(batch_matters, 100, seed=seed, noise=3.0)
        model = RunModel(SPACE, runs)
        best = model.recommend()
        assert best.values in {r.values for r in runs}
        assert best.estimate.sd < model.fitted.noise_sd
        recommended.append(batch_matters(best.values))
        luckiest.append(batch_matters(max(runs, key=lambda r: r.score).values))
    assert sum(recommended) > sum(luckiest), (recommended, luckiest)


def test_only_evaluated_configurations_are_recommended() -> None:
    """The recommendation is one of the runs' configurations (never an extrapolated corner),
    within ``among`` when given; nothing to choose from, or too few runs, is an error."""
    runs = one_factor_runs(batch_matters, 40, seed=3)
    model = RunModel(SPACE, runs)
    evaluated = {e.values for e in model.evaluated()}
    assert evaluated == {r.values for r in runs}
    corner = tuple(dim.high for dim in SPACE.dimensions)
    assert corner not in evaluated and model.recommend().values in evaluated
    some = {runs[0].values, runs[1].values}
    assert model.recommend(among=some).values in some
    with pytest.raises(TooFewRuns):
        model.recommend(among=[corner])
    with pytest.raises(TooFewRuns):
        RunModel(SPACE, runs[: MIN_RUNS - 1])


def test_a_fit_predicts_its_configurations_once() -> None:
    """``evaluated`` (what every dashboard load asks for) predicts once per fit; each caller
    gets its own list, so changing one changes no later answer."""
    model = RunModel(SPACE, one_factor_runs(batch_matters, 40, seed=4))
    calls: list[int] = []
    predict = model.predict

    def counted(values: Sequence[Sequence[float]]) -> list[Estimate]:
        calls.append(len(values))
        return predict(values)

    model.predict = counted  # type: ignore[method-assign]
    first = model.evaluated()
    first.clear()
    assert model.evaluated() == model.evaluated() != []
    assert model.recommend().values in {e.values for e in model.evaluated()}
    assert len(calls) == 1


def test_a_collapsed_run_does_not_sink_its_configuration() -> None:
    """A run far below the rest (a collapse) is raised to the robust bound: its configuration's
    prediction stays near the others'."""
    runs = one_factor_runs(lambda v: 40.0, 60, seed=4, noise=2.0)
    collapsed = RunRecord("collapsed", runs[0].values, runs[0].seed, 3.0)
    model = RunModel(SPACE, [*runs[1:], collapsed])
    estimate = model.predict([collapsed.values])[0]
    assert estimate.mean > 33.0, estimate


def test_a_lower_bound_prefers_the_configuration_with_more_runs() -> None:
    """With k sds taken off, a configuration known from one run loses to an equally good one
    known from several."""
    runs = one_factor_runs(lambda v: 40.0, 45, seed=5, noise=3.0)
    model = RunModel(SPACE, runs)
    by_mean = model.recommend()
    by_bound = model.recommend(lower_bound_sds=2.0)
    assert by_bound.estimate.lower(2.0) >= by_mean.estimate.lower(2.0)


def test_expected_improvement_weighs_mean_against_spread() -> None:
    """Above the incumbent with no spread: the gap; far below with a wide spread: small but
    positive; a wider spread at the same mean: more."""
    gains = expected_improvement(
        [Estimate(42.0, 0.0), Estimate(30.0, 4.0), Estimate(40.0, 1.0), Estimate(40.0, 3.0)],
        40.0,
    )
    assert gains[0] == pytest.approx(2.0)
    assert 0.0 < gains[1] < 0.05
    assert gains[3] > gains[2] > 0.0


def test_rows_become_records_only_when_completed_with_a_score() -> None:
    """SnakeLab rows: a failed run and a completed one without a high score are left out."""
    columns = [path.replace(".", "_") for path in TUNED_PATHS]
    row = dict(zip(columns, DEFAULT, strict=True))
    rows: list[dict[str, object]] = [
        {**row, "run_id": "a", "status": "completed", "high_score": 40, "seed": 1970},
        {**row, "run_id": "b", "status": "failed", "high_score": 12, "seed": 1970},
        {**row, "run_id": "c", "status": "completed", "high_score": None, "seed": 1970},
    ]
    (only,) = records_from_rows(rows)
    assert (only.run_id, only.score, only.seed, only.values) == ("a", 40.0, 1970, DEFAULT)


def test_the_refitter_reuses_a_fit_and_optimises_again_only_as_the_runs_grow() -> None:
    """The same runs give the same fit; one more run is conditioned on with the hyperparameters
    as they were; a fifth more optimises them again (from the last ones)."""
    runs = one_factor_runs(batch_matters, 40, seed=7)
    refitter = Refitter(SPACE)
    first = refitter.fit(runs[:20])
    assert refitter.fit(runs[:20]) is first
    one_more = refitter.fit(runs[:21])
    assert one_more is not first and len(one_more.records) == 21
    assert list(one_more.fitted.kernel.theta) == list(first.fitted.kernel.theta)
    grown = refitter.fit(runs[:25])
    assert list(grown.fitted.kernel.theta) != list(first.fitted.kernel.theta)
    with pytest.raises(TooFewRuns):
        Refitter(SPACE).fit(runs[: MIN_RUNS - 1])
