"""The drqn trainer: reproducibility, the run loop's contract, replay, epsilon and targets."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from snakelab_harness import RecordingControl

from ax3l.shared.config_schema import load_schema
from snakelab.trainers.base import TrainResult
from snakelab.trainers.drqn import (
    DrqnLearner,
    DrqnSettings,
    DrqnTrainer,
    EpisodeReplay,
    EpsilonSchedule,
    ReplayBatch,
    double_dqn_targets,
    food_seed,
)

# The schema's defaults, shrunk so a run takes a fraction of a second (layers and epochs below
# the schema's rules on purpose: the trainer itself does not validate).
SMALL_CONFIG: dict[str, Any] = load_schema().fill_defaults(
    {
        "epochs": 14,
        "model": {"hidden_size": 16, "layers": 3},
        "training": {"sequence_length": 4, "batch_size": 8},
        "epsilon": {"decay": 0.5},
    }
)


def run(
    config: dict[str, Any], control: RecordingControl | None = None
) -> tuple[TrainResult, RecordingControl]:
    recorder = control or RecordingControl()
    return DrqnTrainer().run(copy.deepcopy(config), recorder), recorder


def with_seed(seed: int) -> dict[str, Any]:
    config = copy.deepcopy(SMALL_CONFIG)
    config["seed"] = seed
    return config


def test_same_seed_reproduces_the_run() -> None:
    """Two runs of one config give identical episodes, totals and snapshot."""
    first, first_episodes = run(SMALL_CONFIG)
    second, second_episodes = run(SMALL_CONFIG)
    assert first_episodes.episodes == second_episodes.episodes
    assert first == second
    assert any(episode.loss is not None for episode in first_episodes.episodes)


def test_different_seeds_give_different_runs() -> None:
    """Changing only the seed changes the episodes (food, exploration, initial weights)."""
    _, first = run(with_seed(1970))
    _, second = run(with_seed(1971))
    assert [e.seed for e in first.episodes] != [e.seed for e in second.episodes]
    assert [(e.steps, e.reward) for e in first.episodes] != [
        (e.steps, e.reward) for e in second.episodes
    ]


def test_checkpoint_true_stops_with_a_partial_result() -> None:
    """When checkpoint() returns True before episode 3, the run returns after 2 episodes."""
    result, recorder = run(SMALL_CONFIG, RecordingControl(stop_after=3))
    assert result.episodes_completed == 2
    assert [e.episode for e in recorder.episodes] == [1, 2]
    assert result.total_steps == sum(e.steps for e in recorder.episodes)
    assert result.high_score == max(e.score for e in recorder.episodes)
    assert result.best_snapshot is not None


def test_checkpoint_stop_before_the_first_episode() -> None:
    """A stop at the first checkpoint leaves no episode, no high score and no snapshot."""
    result, recorder = run(SMALL_CONFIG, RecordingControl(stop_after=1))
    assert result.episodes_completed == 0 and recorder.episodes == []
    assert result.high_score is None and result.best_snapshot is None


def test_run_reports_every_episode_in_order() -> None:
    """A full run reports episodes 1..epochs, calls checkpoint once before each, sums totals."""
    result, recorder = run(SMALL_CONFIG)
    episodes = recorder.episodes
    assert [e.episode for e in episodes] == list(range(1, SMALL_CONFIG["epochs"] + 1))
    assert recorder.checkpoints == SMALL_CONFIG["epochs"]
    assert result.episodes_completed == SMALL_CONFIG["epochs"]
    assert result.total_steps == sum(e.steps for e in episodes)
    assert result.total_reward == pytest.approx(sum(e.reward for e in episodes))
    assert result.high_score == max(e.score for e in episodes)
    assert result.last_loss == episodes[-1].loss
    for episode in episodes:
        assert episode.seed == food_seed(SMALL_CONFIG["seed"], episode.episode)
        assert episode.outcome in {"wall", "snake", "max_moves", "board_filled"}
        assert 0 <= episode.epsilon_injections <= episode.steps


def test_episodes_use_the_epsilon_schedule() -> None:
    """Each episode reports the epsilon it played with; at zero it takes no random action."""
    _, recorder = run(SMALL_CONFIG)
    schedule = EpsilonSchedule(0.96, 0.0, 0.5)
    for episode in recorder.episodes:
        assert episode.epsilon == schedule.value
        if episode.epsilon == 0.0:
            assert episode.epsilon_injections == 0
        schedule.advance()
    assert recorder.episodes[0].epsilon_injections > 0
    assert recorder.episodes[-1].epsilon == 0.0


def test_loss_is_none_until_the_replay_holds_a_batch_of_windows() -> None:
    """No gradient step (loss None) happens while fewer than batch_size windows exist."""
    _, recorder = run(SMALL_CONFIG)
    sequence_length = SMALL_CONFIG["training"]["sequence_length"]
    batch_size = SMALL_CONFIG["training"]["batch_size"]
    windows = 0
    for episode in recorder.episodes:
        windows += max(0, episode.steps - sequence_length + 1)
        assert (episode.loss is None) == (windows < batch_size)


def test_snapshot_is_the_best_episode_at_its_last_food() -> None:
    """The snapshot is the latest best-scoring episode's board at the move it last ate."""
    config = copy.deepcopy(SMALL_CONFIG)
    config["epochs"] = 30
    result, recorder = run(config)
    snapshot = result.best_snapshot
    assert snapshot is not None and result.high_score is not None
    best = [e for e in recorder.episodes if e.score == result.high_score][-1]
    assert snapshot["version"] == 1
    assert snapshot["episode"] == best.episode
    board = snapshot["board"]
    assert set(board) == {"grid_size", "snake_head", "snake_body", "food", "direction", "score"}
    assert board["grid_size"] == [20, 20]
    assert board["score"] == result.high_score
    assert len(board["snake_body"]) == 2 + result.high_score
    assert board["direction"] in ([1, 0], [0, 1], [-1, 0], [0, -1])
    if result.high_score == 0:
        assert snapshot["step"] == 0 and board["snake_head"] == [10, 10]
    else:
        assert 0 < snapshot["step"] <= best.steps
        assert board["food"] is not None and board["food"] not in board["snake_body"]


def test_epsilon_decays_and_snaps_to_zero_below_the_cutoff() -> None:
    """Epsilon multiplies by decay each episode and becomes exactly 0 below 0.001 when min is 0."""
    schedule = EpsilonSchedule(0.96, 0.0, 0.97)
    values = [schedule.value]
    while schedule.value > 0.0:
        values.append(schedule.advance())
    assert values[1] == pytest.approx(0.96 * 0.97)
    assert values[-2] >= 0.001 and values[-2] * 0.97 < 0.001
    assert values[-1] == 0.0
    assert schedule.advance() == 0.0


def test_epsilon_floors_at_a_nonzero_minimum_without_snapping() -> None:
    """With a non-zero minimum, epsilon stops at the minimum, even one below the cutoff."""
    schedule = EpsilonSchedule(0.9, 0.05, 0.5)
    for _ in range(20):
        schedule.advance()
    assert schedule.value == 0.05
    tiny = EpsilonSchedule(0.9, 0.0005, 0.5)
    for _ in range(40):
        tiny.advance()
    assert tiny.value == 0.0005


def episode_arrays(episode_id: int, frames: int) -> tuple[np.ndarray, ...]:
    """An episode whose observations encode (episode, index) so windows can be traced back."""
    states = np.zeros((frames + 1, 3), dtype=np.float32)
    states[:, 0] = episode_id
    states[:, 1] = np.arange(frames + 1)
    actions = np.arange(frames) % 3
    rewards = (episode_id * 1000 + np.arange(frames)).astype(np.float32)
    dones = np.zeros(frames, dtype=np.bool_)
    dones[-1] = True
    return states, actions, rewards, dones


def test_replay_windows_never_cross_episodes() -> None:
    """Each sampled window is consecutive moves of one episode and carries its last transition."""
    replay = EpisodeReplay(4, 6, 1000, np.random.default_rng(0))
    for episode_id, frames in enumerate([3, 9, 4, 12, 5], start=1):
        replay.add(*episode_arrays(episode_id, frames))
    assert replay.windows == 6 + 1 + 9 + 2
    seen_windows = set()
    for _ in range(200):
        batch = replay.sample()
        assert batch is not None
        for row in range(6):
            states, next_states = batch.states[row], batch.next_states[row]
            episode_id = states[0, 0]
            assert episode_id != 1  # shorter than a window: never sampled
            assert np.all(states[:, 0] == episode_id) and np.all(next_states[:, 0] == episode_id)
            start = int(states[0, 1])
            np.testing.assert_array_equal(states[:, 1], np.arange(start, start + 4))
            np.testing.assert_array_equal(next_states[:, 1], np.arange(start + 1, start + 5))
            last = start + 3
            assert batch.rewards[row] == episode_id * 1000 + last
            assert batch.actions[row] == last % 3
            assert bool(batch.dones[row]) == (
                last == {2: 9, 3: 4, 4: 12, 5: 5}[int(episode_id)] - 1
            )
            seen_windows.add((int(episode_id), start))
        assert len({(s[0, 0], s[0, 1]) for s in batch.states}) == 6  # without replacement
    assert len(seen_windows) == replay.windows


def test_replay_evicts_the_oldest_episodes_beyond_max_frames() -> None:
    """Whole episodes are dropped, oldest first, once the frame count exceeds max_frames."""
    replay = EpisodeReplay(2, 2, 20, np.random.default_rng(0))
    for episode_id in range(1, 5):
        replay.add(*episode_arrays(episode_id, 8))
    assert replay.frames == 16
    batch = replay.sample()
    assert batch is not None
    assert set(batch.states[:, 0, 0].tolist()) <= {3.0, 4.0}


def test_replay_returns_none_until_enough_windows() -> None:
    """Sampling gives None while there are fewer windows than the batch size."""
    replay = EpisodeReplay(4, 5, 1000, np.random.default_rng(0))
    replay.add(*episode_arrays(1, 7))  # 4 windows
    assert replay.sample() is None
    replay.add(*episode_arrays(2, 4))  # 1 more
    assert isinstance(replay.sample(), ReplayBatch)


def test_double_dqn_target_uses_online_choice_and_target_value() -> None:
    """The target is r + gamma * Q_target(s', argmax Q_online(s')), and just r at episode end."""
    next_online = np.array([[0.0, 5.0, 1.0], [3.0, 0.0, 1.0]])
    next_target = np.array([[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]])
    targets = double_dqn_targets(
        next_online, next_target, np.array([1.0, 2.0]), np.array([False, True]), 0.5
    )
    np.testing.assert_allclose(targets, [1.0 + 0.5 * 20.0, 2.0])


def test_gradient_step_soft_updates_the_target_network() -> None:
    """After one step the target moves tau of the way to the updated online network."""
    settings = DrqnSettings.from_config(SMALL_CONFIG)
    learner = DrqnLearner(settings, np.float64)
    before = learner.target.flat.copy()
    np.testing.assert_array_equal(before, learner.online.flat)
    rng = np.random.default_rng(0)
    shape = (8, 4, 51)
    batch = ReplayBatch(
        rng.random(shape),
        rng.random(shape),
        rng.integers(3, size=8),
        rng.random(8),
        np.zeros(8, dtype=np.bool_),
    )
    loss = learner.train_step(batch)
    assert loss > 0.0
    assert not np.array_equal(learner.online.flat, before)
    expected = before + 0.001 * (learner.online.flat - before)
    np.testing.assert_allclose(learner.target.flat, expected, rtol=1e-12)


def test_food_seed_is_stable_and_differs_per_episode() -> None:
    """Each episode gets its own 63-bit food seed, derived only from the run seed and episode."""
    seeds = [food_seed(1970, episode) for episode in range(1, 200)]
    assert len(set(seeds)) == len(seeds)
    assert all(0 <= seed < 2**63 for seed in seeds)
    assert seeds[0] == food_seed(1970, 1)
    assert food_seed(1971, 1) != seeds[0]
