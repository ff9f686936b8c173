"""Benchmark of the reference SnakeLab's ``drqn`` trainer.

Prints: the acting path's moves per second (network window + game step), the time of one
gradient step, and for each seed the wall time, moves and high score of a full run of the
default configuration (1500 episodes; the real SnakeLab takes about 5 minutes and scores
35-45 on most seeds).

    uv run python bench/bench_drqn.py                 # seeds 1970 1971 1972
    uv run python bench/bench_drqn.py --seeds 1970 --epochs 300
    uv run python bench/bench_drqn.py --micro-only
"""

from __future__ import annotations

import argparse
import copy
import time
from typing import Any

import numpy as np

from ax3l.shared.config_schema import load_schema
from snakelab.trainers.base import EpisodeBatch, EpisodeResult
from snakelab.trainers.drqn import (
    DrqnLearner,
    DrqnSettings,
    DrqnTrainer,
    ReplayBatch,
    single_threaded_blas,
)
from snakelab.trainers.nn import SlidingWindowQ
from snakelab.trainers.snake_env import OBSERVATION_SIZE

# The schema's defaults (the real SnakeLab's default run).
DEFAULT_CONFIG: dict[str, Any] = load_schema().default_config()


class _Recorder:
    """A RunControl that never stops and keeps the episode results."""

    def __init__(self) -> None:
        self.episodes: list[EpisodeResult] = []

    def on_episode(self, result: EpisodeResult) -> None:
        self.episodes.append(result)

    def on_episodes(self, batch: EpisodeBatch) -> None:
        self.episodes.extend(batch.results())

    def checkpoint(self) -> bool:
        return False


def bench_acting(settings: DrqnSettings, moves: int) -> float:
    """Moves per second of greedy play: one window evaluation and one game step per move."""
    learner = DrqnLearner(settings)
    policy = SlidingWindowQ(learner.online, settings.sequence_length)
    rng = np.random.default_rng(0)
    done_moves = 0
    started = time.perf_counter()
    while done_moves < moves:
        game = settings.new_game(rng)
        observation = game.observation()
        policy.start(observation)
        done = False
        while not done and done_moves < moves:
            policy.push(observation).argmax()
            # A fixed mostly-straight pattern keeps games alive without a trained network.
            _, done, _ = game.step(1 if done_moves % 5 else 2)
            observation = game.observation()
            done_moves += 1
    return done_moves / (time.perf_counter() - started)


def bench_train_step(settings: DrqnSettings, repeats: int) -> float:
    """Milliseconds of one gradient step (double-DQN targets, backward, Adam, target update)."""
    learner = DrqnLearner(settings)
    rng = np.random.default_rng(0)
    shape = (settings.batch_size, settings.sequence_length, OBSERVATION_SIZE)
    batch = ReplayBatch(
        rng.random(shape, dtype=np.float32),
        rng.random(shape, dtype=np.float32),
        rng.integers(3, size=settings.batch_size),
        rng.random(settings.batch_size, dtype=np.float32),
        np.zeros(settings.batch_size, dtype=np.bool_),
    )
    learner.train_step(batch)
    started = time.perf_counter()
    for _ in range(repeats):
        learner.train_step(batch)
    return (time.perf_counter() - started) / repeats * 1e3


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1970, 1971, 1972])
    parser.add_argument("--epochs", type=int, default=1500)
    parser.add_argument("--micro-only", action="store_true", help="skip the full runs")
    args = parser.parse_args()

    settings = DrqnSettings.from_config(DEFAULT_CONFIG)
    with single_threaded_blas():
        moves_per_second = bench_acting(settings, 20000)
        step_ms = bench_train_step(settings, 100)
    print(f"acting: {moves_per_second:,.0f} moves/s (window of 8, hidden 224, 4 layers)")
    print(f"gradient step: {step_ms:.1f} ms (batch 24 x 8)")
    if args.micro_only:
        return

    scores = []
    for seed in args.seeds:
        config = copy.deepcopy(DEFAULT_CONFIG)
        config["seed"] = seed
        config["epochs"] = args.epochs
        recorder = _Recorder()
        started = time.perf_counter()
        result = DrqnTrainer().run(config, recorder)
        elapsed = time.perf_counter() - started
        scores.append(result.high_score)
        best = result.best_snapshot["episode"] if result.best_snapshot else None
        print(
            f"seed {seed}: {args.epochs} episodes in {elapsed:.1f} s, "
            f"{result.total_steps:,} moves ({result.total_steps / elapsed:,.0f} moves/s overall), "
            f"high score {result.high_score} (episode {best})"
        )
    print(f"high scores: {scores}")


if __name__ == "__main__":
    main()
