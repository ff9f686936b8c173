"""Tests of the surrogate trainer: its scores, its episode stream and its shipped model."""

from __future__ import annotations

import copy
import importlib.util
import itertools
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from snakelab_harness import RecordingControl

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.registry import ENTRIES
from snakelab.trainers.surrogate import (
    SLEEP_SLICE_SECONDS,
    TUNABLES,
    UNPACED_BATCH,
    SurrogateTrainer,
    expected_high_score,
    load_model,
    predict_high_score,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
FIT_SCRIPT = REPO_ROOT / "scripts" / "fit_surrogate.py"
RUNS_CSV = REPO_ROOT / "data" / "snakelab-runs.csv"
MODEL_JSON = REPO_ROOT / "services/snakelab/src/snakelab/trainers/surrogate_model.json"


def default_config(seed: int = 1970, epochs: int = 1500) -> dict[str, Any]:
    """The schema's default config with the given seed and episode count."""
    return cached_schema().fill_defaults({"seed": seed, "epochs": epochs})


def with_values(config: dict[str, Any], values: dict[str, float]) -> dict[str, Any]:
    """A copy of ``config`` with some tunables (by column name) replaced."""
    result = copy.deepcopy(config)
    for tunable in TUNABLES:
        if tunable.column in values:
            node = result
            for key in tunable.path[:-1]:
                node = node[key]
            value = values[tunable.column]
            node[tunable.path[-1]] = int(value) if tunable.integer else float(value)
    return result


def random_legal_config(rng: np.random.Generator) -> dict[str, Any]:
    """A uniformly drawn legal config with a random seed."""
    values: dict[str, float] = {}
    for tunable in TUNABLES:
        if tunable.domain is not None:
            values[tunable.column] = tunable.domain[int(rng.integers(0, len(tunable.domain)))]
        else:
            values[tunable.column] = round(float(rng.uniform(tunable.low, tunable.high)), 5)
    return with_values(default_config(seed=int(rng.integers(1, 1_000_000))), values)


class FakeTime:
    """A clock that only moves when the trainer sleeps (or a pause is simulated)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def trainer(self, seconds: float) -> SurrogateTrainer:
        """A trainer paced to ``seconds`` on this clock."""
        return SurrogateTrainer(seconds, clock=self.clock, sleep=self.sleep)


def test_default_config_scores_in_the_real_band() -> None:
    """The default config scores 35-45 on most of seeds 1970-1989, like the real SnakeLab."""
    scores = [predict_high_score(default_config(seed)) for seed in range(1970, 1990)]
    assert sum(35 <= s <= 45 for s in scores) >= 15, scores


def test_best_reachable_scores_match_real_tuning() -> None:
    """Across many legal configs and seeds the best scores lie in 45-60, never above."""
    rng = np.random.default_rng(7)
    configs = [random_legal_config(rng) for _ in range(1500)]
    # The region real tuning converged on, where the highest scores live.
    tuned = with_values(
        default_config(),
        {"training_batch_size": 40, "training_sequence_length": 28, "epsilon_decay": 0.98},
    )
    configs += [{**tuned, "seed": seed} for seed in range(1, 501)]
    scores = np.array([predict_high_score(c) for c in configs])
    assert 45 <= scores.max() <= 60
    assert (scores >= 45).sum() >= 10


def test_legal_extremes_stay_in_range() -> None:
    """Every corner of the legal box gives a score in 0-60 without errors."""
    corners = itertools.product(*[(t.low, t.high) for t in TUNABLES])
    for i, corner in enumerate(corners, start=1):  # seeds start at 1: the schema refuses 0
        values = {t.column: v for t, v in zip(TUNABLES, corner, strict=True)}
        score = predict_high_score(with_values(default_config(seed=i), values))
        assert 0 <= score <= 60


def test_shipped_model_was_fitted_on_the_schema_box() -> None:
    """The model's terms are the registry's tunables, scaled by the schema's legal ranges."""
    model = load_model()
    assert [t.column for t in model.tunables] == [c for e in ENTRIES for c in e.columns]
    for term, tunable in zip(model.terms, model.tunables, strict=True):
        half_width = (tunable.coordinate(tunable.high) - tunable.coordinate(tunable.low)) / 2
        assert term["scale"] == pytest.approx(half_width, abs=1e-6), tunable.column


def test_collapses_are_rare() -> None:
    """Collapsed runs (score below 20) exist but make up under 5% of random legal runs."""
    rng = np.random.default_rng(1972)
    scores = np.array([predict_high_score(random_legal_config(rng)) for _ in range(3000)])
    rate = float((scores < 20).mean())
    assert 0.0 < rate < 0.05, rate


def test_collapses_are_likelier_in_bad_regions() -> None:
    """A config far from the tuned region collapses more often than the default."""
    model = load_model()
    good = expected_high_score(default_config())
    bad = expected_high_score(
        with_values(default_config(), {"training_learning_rate": 0.0005, "model_hidden_size": 64})
    )
    assert bad < good - 10
    assert model.collapse_probability(bad) > model.collapse_probability(good) > 0.0


def test_far_regions_degrade_smoothly() -> None:
    """Moving a tunable towards an unexplored legal edge lowers the expected score gradually."""
    base = expected_high_score(default_config())
    paths: list[tuple[str, list[float]]] = [
        ("training_learning_rate", [0.0018, 0.0014, 0.001, 0.0007, 0.0005]),
        ("model_hidden_size", [192, 160, 128, 96, 64]),
        ("epsilon_decay", [0.99, 0.995, 0.997, 0.998, 0.999]),
    ]
    for column, path in paths:
        scores = [expected_high_score(with_values(default_config(), {column: v})) for v in path]
        assert all(b <= a + 1e-9 for a, b in itertools.pairwise(scores)), (column, scores)
        assert scores[-1] < base - 5, (column, scores)
        assert all(abs(b - a) < 15 for a, b in itertools.pairwise(scores)), (column, scores)


def test_same_config_and_seed_give_the_same_run() -> None:
    """A config and seed always give the same score, episodes and snapshot."""
    config = default_config(seed=4242)
    first, second = RecordingControl(), RecordingControl()
    a = SurrogateTrainer(0).run(config, first)
    b = SurrogateTrainer(0).run(copy.deepcopy(config), second)
    assert a == b
    assert first.episodes == second.episodes
    assert predict_high_score(config) == a.high_score


def test_seeds_give_different_scores() -> None:
    """Different seeds of the same config give different scores."""
    scores = {predict_high_score(default_config(seed)) for seed in range(1970, 1990)}
    assert len(scores) >= 5


def test_run_reports_every_epoch_in_order() -> None:
    """A run reports one episode per epoch, numbered from 1, with plausible fields."""
    control = RecordingControl()
    result = SurrogateTrainer(0).run(default_config(epochs=1500), control)
    episodes = control.episodes
    assert [e.episode for e in episodes] == list(range(1, 1501))
    assert result.episodes_completed == 1500
    # Unpaced: in batches, with a checkpoint between two batches.
    assert control.calls == [UNPACED_BATCH] * (1500 // UNPACED_BATCH)
    assert control.checkpoints == len(control.calls) - 1
    assert result.total_steps == sum(e.steps for e in episodes)
    assert result.total_reward == pytest.approx(sum(e.reward for e in episodes))
    outcomes = [e.outcome for e in episodes]
    assert set(outcomes) <= {"wall", "snake", "max_moves"}
    assert outcomes.count("max_moves") < 0.05 * len(outcomes)
    assert all(e.steps > e.score >= 0 and e.epsilon_injections == 0 for e in episodes)
    assert all(e.steps <= 100 * (3 + e.score) + 1 for e in episodes), (
        "the real game ends at max_moves_multiplier * snake length"
    )
    losses = [e.loss for e in episodes]
    first_loss = next(i for i, loss in enumerate(losses) if loss is not None)
    assert all(loss is not None for loss in losses[first_loss:])
    trained = [loss for loss in losses if loss is not None]
    assert np.mean(trained[:100]) > np.mean(trained[-100:]) > 0
    assert result.last_loss == trained[-1]


def test_scores_rise_and_the_running_max_ends_at_the_high_score() -> None:
    """Scores grow over the run and the running max reaches exactly the predicted high score."""
    for seed in range(1970, 1976):
        config = default_config(seed)
        control = RecordingControl()
        result = SurrogateTrainer(0).run(config, control)
        scores = [e.score for e in control.episodes]
        assert max(scores) == result.high_score == predict_high_score(config)
        assert np.mean(scores[-500:]) > np.mean(scores[:500])


def test_epsilon_follows_the_config_schedule() -> None:
    """Epsilon starts at the initial value, decays per episode and snaps to 0 below 0.001."""
    config = with_values(default_config(epochs=500), {"epsilon_initial": 0.9, "epsilon_decay": 0.9})
    control = RecordingControl()
    SurrogateTrainer(0).run(config, control)
    epsilon = 0.9
    for episode in control.episodes:
        assert episode.epsilon is not None
        assert math.isclose(episode.epsilon, epsilon, rel_tol=1e-12, abs_tol=0.0)
        epsilon = max(0.0, epsilon * 0.9)
        if epsilon < 0.001:
            epsilon = 0.0
    assert control.episodes[-1].epsilon == 0.0


def test_checkpoint_true_stops_with_a_partial_result() -> None:
    """When checkpoint() says stop, the run returns what it reported so far."""
    control = RecordingControl(stop_after=2)
    result = SurrogateTrainer(0).run(default_config(), control)
    stopped_at = 2 * UNPACED_BATCH
    assert len(control.episodes) == result.episodes_completed == stopped_at
    assert result.high_score == max(e.score for e in control.episodes)
    assert result.total_steps == sum(e.steps for e in control.episodes)
    assert result.best_snapshot is not None
    assert result.best_snapshot["episode"] <= stopped_at


def test_paced_and_unpaced_runs_report_the_same_episodes() -> None:
    """Batches are only a faster way to report: the episodes equal the paced run's."""
    config = default_config(seed=1975, epochs=600)
    fake = FakeTime()
    paced, unpaced = RecordingControl(), RecordingControl()
    a = fake.trainer(1.0).run(config, paced)
    b = SurrogateTrainer(0).run(config, unpaced)
    assert a == b
    assert paced.episodes == unpaced.episodes
    assert set(paced.calls) == {1}
    assert unpaced.calls == [UNPACED_BATCH, UNPACED_BATCH, 600 - 2 * UNPACED_BATCH]


def test_unpaced_run_never_sleeps_and_is_fast() -> None:
    """With seconds=0 a 1500-episode run never sleeps and takes milliseconds."""

    def no_sleep(seconds: float) -> None:
        raise AssertionError("an unpaced run must not sleep")

    trainer = SurrogateTrainer(0, sleep=no_sleep)
    best = math.inf
    for seed in range(5):
        started = time.process_time()
        trainer.run(default_config(seed=seed), RecordingControl())
        best = min(best, time.process_time() - started)
    assert best < 0.05


def test_paced_run_spreads_episodes_over_the_wall_time() -> None:
    """With seconds > 0 episodes are spread over that time in short, checkpointed sleeps."""
    fake = FakeTime()
    control = RecordingControl()
    fake.trainer(30.0).run(default_config(epochs=500), control)
    assert len(control.episodes) == 500
    assert fake.now == pytest.approx(30.0, abs=SLEEP_SLICE_SECONDS)
    assert max(fake.sleeps) <= SLEEP_SLICE_SECONDS
    assert control.checkpoints >= len(fake.sleeps)


def test_paced_run_cancels_and_pauses_responsively() -> None:
    """A paced run stops within one sleep slice and does not count paused time."""
    fake = FakeTime()
    cancelled = RecordingControl(stop_after=1)
    result = fake.trainer(300.0).run(default_config(), cancelled)
    assert result.episodes_completed == 0 and result.high_score is None
    assert fake.now <= SLEEP_SLICE_SECONDS

    class PausingControl(RecordingControl):
        def checkpoint(self) -> bool:
            if self.checkpoints == 10:
                fake.now += 100.0  # blocked while paused
            return super().checkpoint()

    fake = FakeTime()
    paused = PausingControl()
    fake.trainer(10.0).run(default_config(epochs=500), paused)
    assert len(paused.episodes) == 500
    assert fake.now == pytest.approx(110.0, abs=SLEEP_SLICE_SECONDS)


@pytest.mark.parametrize("seed", [1970, 1975, 2001, 77, 123456])
def test_snapshot_is_a_valid_board(seed: int) -> None:
    """The best-game snapshot is a contract-shaped board consistent with the high score."""
    config = default_config(seed)
    control = RecordingControl()
    result = SurrogateTrainer(0).run(config, control)
    snapshot = result.best_snapshot
    assert snapshot is not None and result.high_score is not None
    assert snapshot["version"] == 1
    first_best = next(e for e in control.episodes if e.score == result.high_score)
    assert snapshot["episode"] == first_best.episode
    assert snapshot["step"] == first_best.steps
    board = snapshot["board"]
    assert board["grid_size"] == [20, 20]
    assert board["score"] == result.high_score
    snake = [board["snake_head"], *board["snake_body"]]
    assert len(snake) == 3 + result.high_score
    assert len({tuple(c) for c in snake}) == len(snake)
    assert all(0 <= x < 20 and 0 <= y < 20 for x, y in snake)
    assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in itertools.pairwise(snake))
    head, neck = snake[0], snake[1]
    assert board["direction"] == [head[0] - neck[0], head[1] - neck[1]]
    food = board["food"]
    assert food is None or (0 <= food[0] < 20 and 0 <= food[1] < 20 and food not in snake)
    json.dumps(snapshot)


def test_shipped_model_equals_the_fit_script_output(tmp_path: Path) -> None:
    """surrogate_model.json is exactly what scripts/fit_surrogate.py produces from the CSV."""
    if not RUNS_CSV.exists():
        pytest.skip(f"{RUNS_CSV} not available")
    spec = importlib.util.spec_from_file_location("fit_surrogate", FIT_SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    output = tmp_path / "model.json"
    assert script.main([str(RUNS_CSV), "--output", str(output)]) == 0
    shipped = json.loads(MODEL_JSON.read_text("utf-8"))
    refitted = json.loads(output.read_text("utf-8"))
    assert _close(shipped, refitted)


def _close(a: Any, b: Any) -> bool:
    """Equal JSON trees, allowing float noise from a different BLAS in the last digits."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-5)
    return bool(a == b)
