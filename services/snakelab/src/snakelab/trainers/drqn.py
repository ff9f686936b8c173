"""Trainer ``drqn``: the real SnakeLab's recurrent double DQN, in numpy.

One run: ``epochs`` episodes of Snake. At every move the network reads the window of the last
``sequence_length`` observations (pre-filled with the episode's first one) and acts
epsilon-greedily. After each episode the whole episode goes into an episode-aware replay
memory and exactly one gradient step is taken on a batch of windows (double DQN target, Huber
loss, Adam, gradient-norm clipping), followed by a soft target-network update.

Reproducibility: every source of randomness has its own generator derived from the run seed
with ``numpy.random.SeedSequence`` (model init, replay sampling, epsilon/random actions,
dropout, and one per episode for food placement), so one seed gives one run exactly on one
machine (BLAS builds may differ in the last bits between machines).
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from snakelab.trainers.base import EpisodeResult, RunControl, TrainResult
from snakelab.trainers.nn import (
    Adam,
    Array,
    NetworkShape,
    SlidingWindowQ,
    clip_gradient_norm,
    dropout_masks,
    init_parameters,
    td_loss_and_gradient,
    view_parameters,
)
from snakelab.trainers.nn import forward as network_forward
from snakelab.trainers.snake_env import (
    ACTION_COUNT,
    OBSERVATION_SIZE,
    Rewards,
    SnakeGame,
)

# Below this, epsilon snaps to zero when the configured minimum is zero (SnakeLab's cutoff).
EPSILON_CUTOFF = 0.001
SNAPSHOT_VERSION = 1

# Spawn keys of the per-purpose generators; never renumber them, or seeds stop reproducing.
_SEED_MODEL = 0
_SEED_REPLAY = 1
_SEED_EPSILON = 2
_SEED_DROPOUT = 3
_SEED_FOOD = 4


def single_threaded_blas() -> contextlib.AbstractContextManager[object]:
    """Limit BLAS to one thread while a run trains.

    The matrices here are small (at most 192 x 448); OpenBLAS's thread hand-off costs more
    than it saves, making a gradient step about 5x slower on a 2-core machine. Without
    ``threadpoolctl`` installed the run still works, only slower.
    """
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return contextlib.nullcontext()
    limits: contextlib.AbstractContextManager[object] = threadpool_limits(limits=1, user_api="blas")
    return limits


def purpose_rng(seed: int, purpose: int) -> np.random.Generator:
    """The generator a run of ``seed`` uses for one purpose (model, replay, ...)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(purpose,)))


def food_seed(seed: int, episode: int) -> int:
    """The food-placement seed of one episode (reported as the episode's ``seed``)."""
    state = np.random.SeedSequence(seed, spawn_key=(_SEED_FOOD, episode)).generate_state(
        1, np.uint64
    )
    return int(state[0] >> np.uint64(1))  # 63 bits: fits a signed BIGINT and every client


@dataclass(frozen=True)
class DrqnSettings:
    """The parts of a full SnakeLab configuration this trainer reads."""

    epochs: int
    seed: int
    board_width: int
    board_height: int
    initial_snake_length: int
    max_moves_multiplier: int
    rewards: Rewards
    hidden_size: int
    layers: int
    dropout: float
    sequence_length: int
    batch_size: int
    replay_max_frames: int
    learning_rate: float
    gamma: float
    tau: float
    max_gradient_norm: float
    epsilon_initial: float
    epsilon_minimum: float
    epsilon_decay: float

    def new_game(self, food_rng: np.random.Generator) -> SnakeGame:
        """A fresh game on this configuration's board and rewards."""
        return SnakeGame(
            width=self.board_width,
            height=self.board_height,
            initial_length=self.initial_snake_length,
            max_moves_multiplier=self.max_moves_multiplier,
            rewards=self.rewards,
            food_rng=food_rng,
        )

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> DrqnSettings:
        """Read a full, validated SnakeLab configuration."""
        game, model = config["game"], config["model"]
        training, epsilon = config["training"], config["epsilon"]
        return cls(
            epochs=int(config["epochs"]),
            seed=int(config["seed"]),
            board_width=int(game["board_width"]),
            board_height=int(game["board_height"]),
            initial_snake_length=int(game["initial_snake_length"]),
            max_moves_multiplier=int(game["max_moves_multiplier"]),
            rewards=Rewards.from_config(game["rewards"]),
            hidden_size=int(model["hidden_size"]),
            layers=int(model["layers"]),
            dropout=float(model["dropout"]),
            sequence_length=int(training["sequence_length"]),
            batch_size=int(training["batch_size"]),
            replay_max_frames=int(training["replay_max_frames"]),
            learning_rate=float(training["learning_rate"]),
            gamma=float(training["gamma"]),
            tau=float(training["tau"]),
            max_gradient_norm=float(training["max_gradient_norm"]),
            epsilon_initial=float(epsilon["initial"]),
            epsilon_minimum=float(epsilon["minimum"]),
            epsilon_decay=float(epsilon["decay"]),
        )


class EpsilonSchedule:
    """Exploration rate: multiplied by ``decay`` after each episode, floored at ``minimum``."""

    def __init__(self, initial: float, minimum: float, decay: float) -> None:
        self.value = initial
        self.minimum = minimum
        self.decay = decay

    def advance(self) -> float:
        """Apply one episode's decay and return the new value."""
        value = max(self.minimum, self.value * self.decay)
        # A zero floor would otherwise only be approached, never reached.
        if self.minimum == 0.0 and value < EPSILON_CUTOFF:
            value = 0.0
        self.value = value
        return value


@dataclass(frozen=True)
class ReplayBatch:
    """Windows of observations and the transition each window ends with."""

    states: Array  # (B, T, obs)
    next_states: Array  # (B, T, obs): the same windows one move later
    actions: Array  # (B,)
    rewards: Array  # (B,)
    dones: Array  # (B,)


@dataclass(frozen=True)
class _Episode:
    states: Array  # (n + 1, obs): every observation, the terminal one included
    actions: Array  # (n,)
    rewards: Array  # (n,)
    dones: Array  # (n,)

    @property
    def frames(self) -> int:
        return int(self.actions.shape[0])


class EpisodeReplay:
    """Replay memory of whole episodes, sampled as windows that never cross episodes.

    Episodes shorter than a window are kept (they count towards ``max_frames``) but never
    sampled, as in SnakeLab. The oldest episodes go first once ``max_frames`` is exceeded.
    """

    def __init__(
        self, sequence_length: int, batch_size: int, max_frames: int, rng: np.random.Generator
    ) -> None:
        self.sequence_length = sequence_length
        self.batch_size = batch_size
        self.max_frames = max_frames
        self._rng = rng
        self._episodes: deque[_Episode] = deque()
        self.frames = 0
        self._eligible: list[_Episode] = []
        self._window_ends = np.zeros(0, dtype=np.int64)

    def add(self, states: Array, actions: Array, rewards: Array, dones: Array) -> None:
        """Store one finished episode (``states`` has one more row than ``actions``)."""
        episode = _Episode(states, actions, rewards, dones)
        self._episodes.append(episode)
        self.frames += episode.frames
        while self.frames > self.max_frames:
            self.frames -= self._episodes.popleft().frames
        self._eligible = [e for e in self._episodes if e.frames >= self.sequence_length]
        windows = [e.frames - self.sequence_length + 1 for e in self._eligible]
        self._window_ends = np.cumsum(np.array(windows, dtype=np.int64))

    @property
    def windows(self) -> int:
        """How many distinct windows can be sampled."""
        return int(self._window_ends[-1]) if self._window_ends.size else 0

    def sample(self) -> ReplayBatch | None:
        """``batch_size`` distinct windows drawn uniformly, or None while there are too few."""
        total = self.windows
        if total < self.batch_size:
            return None
        length = self.sequence_length
        ids = self._rng.choice(total, size=self.batch_size, replace=False)
        owners = np.searchsorted(self._window_ends, ids, side="right")
        first = self._eligible[0].states
        windows = np.empty((self.batch_size, length + 1, first.shape[1]), dtype=first.dtype)
        actions = np.empty(self.batch_size, dtype=np.intp)
        rewards = np.empty(self.batch_size, dtype=first.dtype)
        dones = np.empty(self.batch_size, dtype=np.bool_)
        for row, (window_id, owner) in enumerate(zip(ids.tolist(), owners.tolist(), strict=True)):
            before = int(self._window_ends[owner - 1]) if owner else 0
            start = window_id - before
            last = start + length - 1
            episode = self._eligible[owner]
            windows[row] = episode.states[start : start + length + 1]
            actions[row] = episode.actions[last]
            rewards[row] = episode.rewards[last]
            dones[row] = episode.dones[last]
        return ReplayBatch(windows[:, :-1], windows[:, 1:], actions, rewards, dones)


def double_dqn_targets(
    next_online: Array, next_target: Array, rewards: Array, dones: Array, gamma: float
) -> Array:
    """``r + gamma * Q_target(s', argmax_a Q_online(s', a))``, without the bootstrap at the end.

    Letting the online network choose and the target network value the next action is what
    keeps double DQN from overestimating.
    """
    rows = np.arange(len(rewards))
    next_values = next_target[rows, next_online.argmax(axis=1)]
    targets: Array = rewards + gamma * next_values * ~dones
    return targets


class DrqnLearner:
    """Online and target networks, the optimiser, and the once-per-episode gradient step."""

    def __init__(self, settings: DrqnSettings, dtype: Any = np.float32) -> None:
        self.shape = NetworkShape(
            OBSERVATION_SIZE, settings.hidden_size, settings.layers, ACTION_COUNT
        )
        self.settings = settings
        self.dtype = np.dtype(dtype)
        flat = init_parameters(self.shape, purpose_rng(settings.seed, _SEED_MODEL), self.dtype)
        self.online = view_parameters(self.shape, flat)
        self.target = view_parameters(self.shape, flat.copy())
        self.grads = view_parameters(self.shape, np.zeros_like(flat))
        self.optimizer = Adam(flat.size, settings.learning_rate, self.dtype)
        self._dropout_rng = purpose_rng(settings.seed, _SEED_DROPOUT)
        self._tau = self.dtype.type(settings.tau)

    def train_step(self, batch: ReplayBatch) -> float:
        """One double-DQN gradient step on ``batch``, then the soft target update; the loss."""
        settings = self.settings
        states = batch.states.astype(self.dtype, copy=False)
        next_states = batch.next_states.astype(self.dtype, copy=False)
        next_online, _ = network_forward(self.online, next_states)
        next_target, _ = network_forward(self.target, next_states)
        targets = double_dqn_targets(
            next_online, next_target, batch.rewards, batch.dones, settings.gamma
        )
        masks = dropout_masks(
            self._dropout_rng,
            settings.dropout,
            self.shape.layers - 1,
            (states.shape[1], states.shape[0], self.shape.hidden_size),
            self.dtype,
        )
        loss = td_loss_and_gradient(
            self.online, self.grads, states, batch.actions, targets.astype(self.dtype), masks
        )
        clip_gradient_norm(self.grads.flat, settings.max_gradient_norm)
        self.optimizer.step(self.online.flat, self.grads.flat)
        target = self.target.flat
        target += self._tau * (self.online.flat - target)
        return loss


@dataclass
class _EpisodeOutcome:
    result: EpisodeResult
    best_board: dict[str, Any]  # the board when the score last rose (the start if it never did)
    best_step: int


class DrqnTrainer:
    """The reference SnakeLab's real training algorithm (see the module docstring)."""

    name = "drqn"

    def __init__(self, dtype: Any = np.float32) -> None:
        self.dtype = dtype

    def run(self, config: dict[str, Any], control: RunControl) -> TrainResult:
        """Train for ``config["epochs"]`` episodes, stopping early when ``checkpoint()`` says so.

        ``control.checkpoint()`` is called before every episode (never after the last one).
        The snapshot is the board of the best episode (the latest one on a tie) at the move
        its last food was eaten, as the real SnakeLab stores it.
        """
        with single_threaded_blas():
            return self._run(DrqnSettings.from_config(config), control)

    def _run(self, settings: DrqnSettings, control: RunControl) -> TrainResult:
        learner = DrqnLearner(settings, self.dtype)
        policy = SlidingWindowQ(learner.online, settings.sequence_length)
        replay = EpisodeReplay(
            settings.sequence_length,
            settings.batch_size,
            settings.replay_max_frames,
            purpose_rng(settings.seed, _SEED_REPLAY),
        )
        epsilon = EpsilonSchedule(
            settings.epsilon_initial, settings.epsilon_minimum, settings.epsilon_decay
        )
        action_rng = purpose_rng(settings.seed, _SEED_EPSILON)
        result = TrainResult(episodes_completed=0, high_score=None, total_steps=0, total_reward=0.0)
        for episode in range(1, settings.epochs + 1):
            if control.checkpoint():
                break
            outcome = _play_episode(settings, episode, policy, epsilon.value, action_rng, replay)
            batch = replay.sample()
            loss = learner.train_step(batch) if batch is not None else None
            episode_result = replace(outcome.result, loss=loss)
            epsilon.advance()

            if result.high_score is None or episode_result.score >= result.high_score:
                result.high_score = episode_result.score
                result.best_snapshot = {
                    "version": SNAPSHOT_VERSION,
                    "episode": episode,
                    "step": outcome.best_step,
                    "board": outcome.best_board,
                }
            result.episodes_completed = episode
            result.total_steps += episode_result.steps
            result.total_reward += episode_result.reward
            result.last_loss = loss
            control.on_episode(episode_result)
        result.extra = {"trainer": self.name, "final_epsilon": epsilon.value}
        return result


def _play_episode(
    settings: DrqnSettings,
    episode: int,
    policy: SlidingWindowQ,
    epsilon: float,
    action_rng: np.random.Generator,
    replay: EpisodeReplay,
) -> _EpisodeOutcome:
    """Play one episode with the current network and store it in the replay memory."""
    seed = food_seed(settings.seed, episode)
    game = settings.new_game(np.random.default_rng(seed))
    observation = game.observation()
    policy.start(observation)
    observations = [observation]
    actions: list[int] = []
    rewards: list[float] = []
    best_board, best_step = game.board(), 0
    injections = 0
    explore = epsilon > 0.0
    while True:
        q_values = policy.push(observation)
        if explore and action_rng.random() < epsilon:
            action = int(action_rng.integers(ACTION_COUNT))
            injections += 1
        else:
            action = int(q_values.argmax())
        reward, done, outcome = game.step(action)
        observation = game.observation()
        observations.append(observation)
        actions.append(action)
        rewards.append(reward)
        if outcome == "food" or outcome == "board_filled":
            best_board, best_step = game.board(), game.moves
        if done:
            break
    dones = np.zeros(len(actions), dtype=np.bool_)
    dones[-1] = True
    reward_array = np.array(rewards, dtype=np.float32)
    replay.add(np.stack(observations), np.array(actions, dtype=np.intp), reward_array, dones)
    result = EpisodeResult(
        episode=episode,
        seed=seed,
        score=game.score,
        reward=float(sum(rewards)),
        steps=game.moves,
        outcome=outcome,
        epsilon=epsilon,
        epsilon_injections=injections,
        loss=None,
    )
    return _EpisodeOutcome(result, best_board, best_step)
