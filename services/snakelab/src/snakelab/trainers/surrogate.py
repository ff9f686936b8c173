"""The ``surrogate`` trainer: a response surface fitted to real SnakeLab runs.

It answers a run in microseconds instead of minutes, with scores that look like the real
SnakeLab's: the fitted mean for the nine tunable values, a per-seed offset, residual noise
drawn from the real runs' residual distribution, and rare collapses. Everything random is
derived from a SHA-256 of the canonical config, so a config and seed always give the same
run. The coefficients live in ``surrogate_model.json`` (written by
``scripts/fit_surrogate.py``); ``services/snakelab/SURROGATE.md`` explains the model.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from ax3l.shared.config_schema import ConfigSchema, Leaf, SchemaFileError, cached_schema
from ax3l.shared.registry import ENTRIES, leaf_domain
from snakelab.trainers.base import EpisodeBatch, EpisodeResult, Outcome, RunControl, TrainResult
from snakelab.trainers.snake_env import DIRECTIONS

MODEL_FILE = "surrogate_model.json"
GRID_SIZE = 20
INITIAL_SNAKE_LENGTH = 3
MAX_MOVES_MULTIPLIER = 100
FOOD_REWARD = 10.0
DEATH_REWARD = -10.0
# Below this the real SnakeLab snaps epsilon to 0 when the minimum is 0.
EPSILON_SNAP = 0.001
# Longest sleep between two checkpoint() calls, so pause and cancel stay responsive.
SLEEP_SLICE_SECONDS = 0.05
# Episodes per on_episodes() call of an unpaced run; checkpoint() is asked between batches.
UNPACED_BATCH = 250

Transform = Callable[[float], float]


def _neg_log10_complement(x: float) -> float:
    # gamma and epsilon decay act through 1 / (1 - x) (horizon, episodes of exploration).
    return -math.log10(1.0 - x)


TRANSFORMS: dict[str, Transform] = {
    "identity": lambda x: x,
    "log2": math.log2,
    "log10": math.log10,
    "neg_log10_complement": _neg_log10_complement,
}


# The scale each tuned value is modelled on (SURROGATE.md, "Scales"), by config path. Which
# values are tuned comes from the registry, their type and range from the schema.
SCALES: dict[str, str] = {
    "model.hidden_size": "log2",
    "training.sequence_length": "log2",
    "training.batch_size": "log2",
    "training.learning_rate": "log10",
    "training.gamma": "neg_log10_complement",
    "epsilon.initial": "identity",
    "epsilon.decay": "neg_log10_complement",
    "game.rewards.closer_to_food": "identity",
    "game.rewards.further_from_food": "identity",
}


@dataclass(frozen=True)
class Tunable:
    """One tuned config value: where it lives, its legal range and its modelling scale."""

    path: tuple[str, ...]
    low: float
    high: float
    integer: bool
    transform: str
    domain: tuple[float, ...] | None  # every legal value, or None when continuous

    @classmethod
    def of(cls, leaf: Leaf) -> Tunable:
        """The tunable of a schema leaf, with the scale ``SCALES`` gives its path."""
        if leaf.minimum is None or leaf.maximum is None:
            raise SchemaFileError(f"{leaf.path} is tuned but the schema gives it no range")
        integer = leaf.type == "integer"
        legal = leaf_domain(leaf)
        return cls(
            path=tuple(leaf.path.split(".")),
            low=leaf.minimum,
            high=leaf.maximum,
            integer=integer,
            transform=SCALES[leaf.path],
            domain=None if legal is None else tuple(int(v) if integer else float(v) for v in legal),
        )

    @property
    def column(self) -> str:
        """The value's column name in SnakeLab's ``configurations`` table."""
        return "_".join(self.path)

    def coordinate(self, value: float) -> float:
        """The value on the scale the response surface is quadratic in."""
        return TRANSFORMS[self.transform](value)


def tunables(schema: ConfigSchema) -> tuple[Tunable, ...]:
    """Every leaf of the registry's entries, in registry order, as a tunable of ``schema``."""
    return tuple(Tunable.of(schema.by_path[path]) for entry in ENTRIES for path in entry.paths)


# The bundled schema, not a server's --schema: the model was fitted on this legal box (its
# scales and edge penalties are fractions of the box), so another box would change scores.
TUNABLES: tuple[Tunable, ...] = tunables(cached_schema())


def _leaf(config: Mapping[str, Any], path: Sequence[str]) -> Any:
    node: Any = config
    for key in path:
        node = node[key]
    return node


def tunable_values(config: Mapping[str, Any]) -> dict[str, float]:
    """The nine tunable values of a nested config, keyed by column name."""
    values: dict[str, float] = {}
    for tunable in TUNABLES:
        raw = _leaf(config, tunable.path)
        values[tunable.column] = float(int(raw)) if tunable.integer else float(raw)
    return values


def epsilon_schedule(
    initial: float, decay: float, minimum: float, episodes: int
) -> npt.NDArray[np.float64]:
    """Epsilon used in each episode, computed exactly as the real SnakeLab's update loop."""
    factors = np.full(episodes, decay, dtype=np.float64)
    factors[0] = initial
    # cumprod multiplies left to right, so the floats match repeated ``eps *= decay``.
    epsilon: npt.NDArray[np.float64] = np.maximum(np.cumprod(factors), minimum)
    if minimum == 0.0:
        epsilon[epsilon < EPSILON_SNAP] = 0.0
    epsilon[0] = initial
    return epsilon


def _canonical_key(config: Mapping[str, Any]) -> str:
    values = tunable_values(config)
    key: dict[str, Any] = {"epochs": int(config["epochs"]), "seed": int(config["seed"])}
    for tunable in TUNABLES:
        value = values[tunable.column]
        # Round floats so 0.0021 and 0.0021000000000000003 are the same run.
        key[tunable.column] = int(value) if tunable.integer else float(f"{value:.10g}")
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


def _unit_draws(text: str, count: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [int.from_bytes(digest[8 * i : 8 * i + 8], "big") / 2.0**64 for i in range(count)]


@lru_cache(maxsize=4096)
def _exploitation_factor(
    initial: float, decay: float, epochs: int, greedy_moves: float, tau: float, floor: float
) -> float:
    # Cached: tuners revisit the same few (initial, decay) pairs and the sum is 1500 terms.
    epsilon = epsilon_schedule(initial, decay, 0.0, epochs)
    greedy_episodes = float(np.sum((1.0 - epsilon) ** greedy_moves))
    saturation = 1.0 - math.exp(-greedy_episodes / tau)
    return floor + (1.0 - floor) * saturation


class SurrogateModel:
    """The fitted response surface (the parsed ``surrogate_model.json``)."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = spec
        self.intercept = float(spec["intercept"])
        self.terms = [dict(term) for term in spec["terms"]]
        by_column = {tunable.column: tunable for tunable in TUNABLES}
        self.tunables = [by_column[term["column"]] for term in self.terms]
        self.seed_offsets = {int(k): float(v) for k, v in spec["seed_offsets"].items()}
        self.seed_offset_sd = float(spec["seed_offset_sd"])
        exploitation = spec["exploitation"]
        self.greedy_moves = float(exploitation["greedy_moves"])
        self.exploitation_tau = float(exploitation["tau"])
        self.exploitation_floor = float(exploitation["floor"])
        collapse = spec["collapse"]
        self.collapse_base = float(collapse["base_probability"])
        self.collapse_max = float(collapse["max_probability"])
        self.collapse_badness_scale = float(collapse["badness_scale"])
        self.collapse_reference = float(collapse["reference_score"])
        self.collapse_depth = (float(collapse["depth_range"][0]), float(collapse["depth_range"][1]))
        self.ceiling_cap = float(spec["ceiling"]["cap"])
        self.ceiling_softness = float(spec["ceiling"]["softness"])
        quantiles = np.asarray(spec["residual_quantiles"], dtype=np.float64)
        self.residual_levels = quantiles[:, 0]
        self.residual_values = quantiles[:, 1]

    def surface(self, values: Mapping[str, float]) -> float:
        """Fitted score for these tunable values with unlimited exploitation, before seeds."""
        total = self.intercept
        for term, tunable in zip(self.terms, self.tunables, strict=True):
            u = tunable.coordinate(values[tunable.column])
            low, high = term["support"]
            inside = min(max(u, low), high)
            z = (inside - term["center"]) / term["scale"]
            total += term["linear"] * z + term["quadratic"] * z * z
            # The data holds no runs out there: assume the score degrades smoothly instead
            # of trusting a quadratic extrapolated from a few edge points.
            width = tunable.coordinate(tunable.high) - tunable.coordinate(tunable.low)
            distance = abs(u - inside) / width
            total -= term["edge_penalty"] * distance * distance
        return total

    def exploitation_factor(self, initial: float, decay: float, epochs: int) -> float:
        """Share of the fitted score a run reaches given how many near-greedy episodes it has.

        A run only shows its policy in episodes where epsilon is small; counting an episode by
        the chance that ``greedy_moves`` moves in a row are greedy makes short runs and slow
        decays (epsilon still high at the end) score lower, which the data cannot show.
        """
        return _exploitation_factor(
            initial,
            decay,
            epochs,
            self.greedy_moves,
            self.exploitation_tau,
            self.exploitation_floor,
        )

    def seed_offset(self, seed: int) -> float:
        """Score shift of a seed: fitted for seeds in the data, drawn from a hash otherwise."""
        if seed in self.seed_offsets:
            return self.seed_offsets[seed]
        (u,) = _unit_draws(f"snakelab-surrogate-seed:{seed}", 1)
        u = min(max(u, 1e-12), 1.0 - 1e-12)
        return self.seed_offset_sd * NormalDist().inv_cdf(u)

    def mean_score(self, values: Mapping[str, float], epochs: int, seed: int | None) -> float:
        """Expected high score without noise or collapse; ``seed=None`` averages over seeds."""
        base = self.surface(values)
        if seed is not None:
            base += self.seed_offset(seed)
        factor = self.exploitation_factor(
            values["epsilon_initial"], values["epsilon_decay"], epochs
        )
        return max(0.0, base * factor)

    def collapse_probability(self, mean: float) -> float:
        """Chance that a run collapses; grows as the config's expected score drops."""
        badness = max(0.0, 1.0 - mean / self.collapse_reference)
        weight = 1.0 - math.exp(-badness / self.collapse_badness_scale)
        return self.collapse_base + (self.collapse_max - self.collapse_base) * weight

    def _soft_ceiling(self, score: float) -> float:
        cap, softness = self.ceiling_cap, self.ceiling_softness
        # Smooth min(score, cap): leaves ordinary scores alone, never exceeds the cap.
        gap = (cap - score) / softness
        softplus = gap + math.log1p(math.exp(-gap)) if gap > 0 else math.log1p(math.exp(gap))
        return cap - softness * softplus

    def high_score(self, config: Mapping[str, Any]) -> int:
        """The run's final high score: deterministic in the config including its seed."""
        values = tunable_values(config)
        mean = self.mean_score(values, int(config["epochs"]), int(config["seed"]))
        u_noise, u_collapse, u_depth = _unit_draws(_canonical_key(config), 3)
        if u_collapse < self.collapse_probability(mean):
            low, high = self.collapse_depth
            return max(1, round(mean * (low + (high - low) * u_depth)))
        relative = float(np.interp(u_noise, self.residual_levels, self.residual_values))
        score = self._soft_ceiling(mean * (1.0 + relative))
        return max(0, round(score))


@lru_cache(maxsize=1)
def load_model() -> SurrogateModel:
    """The packaged model, parsed once."""
    text = resources.files("snakelab.trainers").joinpath(MODEL_FILE).read_text("utf-8")
    return SurrogateModel(json.loads(text))


def predict_high_score(config: dict[str, Any]) -> int:
    """High score the surrogate gives a full config (seed included), without running it."""
    return load_model().high_score(config)


def expected_high_score(config: dict[str, Any]) -> float:
    """Noise-free score of a config averaged over seeds: the quality a tuner is after."""
    model = load_model()
    return model.mean_score(tunable_values(config), int(config["epochs"]), None)


@dataclass(frozen=True)
class _Trajectory:
    scores: list[int]
    steps: list[int]
    rewards: list[float]
    outcomes: list[Outcome]
    epsilons: list[float | None]  # always a number here; EpisodeBatch's column type
    losses: list[float | None]
    food_seeds: list[int]


def _trajectory(
    config: Mapping[str, Any], high_score: int, rng: np.random.Generator
) -> _Trajectory:
    """Per-episode data of a run whose running max reaches exactly ``high_score``."""
    episodes = int(config["epochs"])
    eps = config["epsilon"]
    epsilon = epsilon_schedule(
        float(eps["initial"]), float(eps["decay"]), float(eps["minimum"]), episodes
    )
    index = np.arange(1, episodes + 1, dtype=np.float64)
    # Learning needs both low exploration and accumulated gradient steps.
    progress = (1.0 - epsilon) ** 2 * (1.0 - np.exp(-index / (0.2 * episodes)))
    raw = progress * rng.beta(2.0, 2.5, episodes)
    best = int(np.argmax(raw))
    top = float(raw[best])
    scale = high_score / top if top > 0.0 else 0.0
    scores = np.minimum(np.floor(raw * scale), high_score).astype(np.int64)
    scores[best] = high_score

    length = INITIAL_SNAKE_LENGTH + scores
    travel = scores * (9.0 + 0.3 * scores) * rng.uniform(0.7, 1.3, episodes)
    steps = np.rint(travel + rng.uniform(3.0, 40.0, episodes)).astype(np.int64)
    steps = np.maximum(steps, scores + 1)
    draw = rng.random(episodes)
    timed_out = draw < 0.005
    hit_self = ~timed_out & (draw < 0.005 + scores / (scores + 15.0))
    steps[timed_out] = MAX_MOVES_MULTIPLIER * length[timed_out] + 1

    rewards_cfg = config["game"]["rewards"]
    shaping_moves = steps - scores - 1
    toward_share = np.clip(0.5 + 0.3 * progress + rng.normal(0.0, 0.05, episodes), 0.0, 1.0)
    closer_moves = np.rint(shaping_moves * toward_share)
    rewards = (
        FOOD_REWARD * scores
        + DEATH_REWARD
        + float(rewards_cfg["closer_to_food"]) * closer_moves
        + float(rewards_cfg["further_from_food"]) * (shaping_moves - closer_moves)
    )

    training = config["training"]
    window_frames = int(training["batch_size"]) * int(training["sequence_length"])
    # No gradient step until the replay holds one batch of windows.
    untrained = int(np.searchsorted(np.cumsum(steps), window_frames))
    loss = (0.12 + 1.4 * np.exp(-index / (0.25 * episodes))) * rng.lognormal(0.0, 0.3, episodes)
    losses: list[float | None] = [None] * untrained
    losses += np.round(loss[untrained:], 6).tolist()

    outcome_names: list[Outcome] = ["wall", "snake", "max_moves"]
    outcome_codes = np.where(timed_out, 2, np.where(hit_self, 1, 0)).tolist()
    food_seeds = np.random.SeedSequence([int(config["seed"]), 0xF00D]).generate_state(episodes)
    return _Trajectory(
        scores=scores.tolist(),
        steps=steps.tolist(),
        rewards=rewards.tolist(),
        outcomes=[outcome_names[code] for code in outcome_codes],
        epsilons=epsilon.tolist(),
        losses=losses,
        food_seeds=food_seeds.tolist(),
    )


def _snake_cells(length: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """A self-avoiding chain of ``length`` cells inside the board, head first."""
    attempts = 20
    starts = rng.integers(2, GRID_SIZE - 2, size=(attempts, 2)).tolist()
    headings = rng.integers(0, 4, size=attempts).tolist()
    # Mostly straight: trained snakes move in runs, not random jitter.
    turns = rng.choice(np.array([0, 0, 0, 1, 3]), size=(attempts, length)).tolist()
    for (x, y), heading, turn_row in zip(starts, headings, turns, strict=True):
        cells = [(x, y)]
        taken = {(x, y)}
        for turn in turn_row[1:]:
            for candidate in ((heading + turn) % 4, (heading + 1) % 4, (heading + 3) % 4):
                dx, dy = DIRECTIONS[candidate]
                nxt = (cells[-1][0] + dx, cells[-1][1] + dy)
                if 0 <= nxt[0] < GRID_SIZE and 0 <= nxt[1] < GRID_SIZE and nxt not in taken:
                    cells.append(nxt)
                    taken.add(nxt)
                    heading = candidate
                    break
            else:
                break
        if len(cells) == length:
            return cells
    # Boustrophedon always fits (length is far below the 400 cells of the board).
    serpentine = [
        (col if row % 2 == 0 else GRID_SIZE - 1 - col, row)
        for row in range(GRID_SIZE)
        for col in range(GRID_SIZE)
    ]
    return serpentine[:length]


def _food_cell(taken: set[tuple[int, int]], rng: np.random.Generator) -> list[int] | None:
    for x, y in rng.integers(0, GRID_SIZE, size=(32, 2)).tolist():
        if (x, y) not in taken:
            return [x, y]
    free = [(x, y) for x in range(GRID_SIZE) for y in range(GRID_SIZE) if (x, y) not in taken]
    return list(free[int(rng.integers(0, len(free)))]) if free else None


def _snapshot(episode: int, step: int, score: int, rng: np.random.Generator) -> dict[str, Any]:
    """The contract's snapshot JSON for a board with a snake of ``3 + score`` cells."""
    cells = _snake_cells(INITIAL_SNAKE_LENGTH + score, rng)
    head, body = cells[0], cells[1:]
    direction = [head[0] - body[0][0], head[1] - body[0][1]]
    food = _food_cell(set(cells), rng)
    return {
        "version": 1,
        "episode": episode,
        "step": step,
        "board": {
            "grid_size": [GRID_SIZE, GRID_SIZE],
            "snake_head": list(head),
            "snake_body": [list(cell) for cell in body],
            "food": food,
            "direction": direction,
            "score": score,
        },
    }


class _Pacer:
    """Spreads episodes over wall time; time spent paused in checkpoint() does not count."""

    def __init__(
        self,
        seconds: float,
        episodes: int,
        control: RunControl,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self.interval = seconds / episodes if episodes else 0.0
        self.control = control
        self.clock = clock
        self.sleep = sleep
        self.start = clock()
        self.paused = 0.0

    def checkpoint(self) -> bool:
        before = self.clock()
        stop = self.control.checkpoint()
        self.paused += self.clock() - before
        return stop

    def wait_for(self, episode: int) -> bool:
        """Sleep until ``episode`` (1-based) is due; True when the run must stop."""
        while True:
            remaining = self.start + self.paused + self.interval * episode - self.clock()
            if remaining <= 0.0:
                return False
            self.sleep(min(remaining, SLEEP_SLICE_SECONDS))
            if self.checkpoint():
                return True


class SurrogateTrainer:
    """Trainer that replays a synthetic run ending at the response surface's high score."""

    name = "surrogate"

    def __init__(
        self,
        seconds: float = 0.0,
        *,
        model: SurrogateModel | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        self.seconds = seconds
        self._model = model
        self._clock = clock
        self._sleep = sleep

    def run(self, config: dict[str, Any], control: RunControl) -> TrainResult:
        """Report ``config["epochs"]`` synthetic episodes, stopping early when told to."""
        model = self._model if self._model is not None else load_model()
        high_score = model.high_score(config)
        digest = hashlib.sha256(("trajectory:" + _canonical_key(config)).encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "big"))
        traj = _trajectory(config, high_score, rng)
        if self.seconds <= 0:
            completed = self._report_unpaced(traj, control)
        else:
            completed = self._report_paced(traj, control)
        return self._result(traj, completed, rng)

    @staticmethod
    def _report_unpaced(traj: _Trajectory, control: RunControl) -> int:
        """Episodes in batches as fast as the server takes them; the episodes completed.

        ``checkpoint()`` is asked between batches, so a cancel still lands within a batch.
        """
        episodes = len(traj.scores)
        completed = 0
        while completed < episodes:
            end = min(completed + UNPACED_BATCH, episodes)
            control.on_episodes(
                EpisodeBatch(
                    first=completed + 1,
                    seeds=traj.food_seeds[completed:end],
                    scores=traj.scores[completed:end],
                    rewards=traj.rewards[completed:end],
                    steps=traj.steps[completed:end],
                    outcomes=traj.outcomes[completed:end],
                    epsilons=traj.epsilons[completed:end],
                    epsilon_injections=[0] * (end - completed),
                    losses=traj.losses[completed:end],
                )
            )
            completed = end
            if completed < episodes and control.checkpoint():
                break
        return completed

    def _report_paced(self, traj: _Trajectory, control: RunControl) -> int:
        """Episodes one by one, spread over ``seconds`` of wall time; the episodes completed."""
        episodes = len(traj.scores)
        pacer = _Pacer(self.seconds, episodes, control, self._clock, self._sleep)
        completed = 0
        for index in range(episodes):
            if pacer.wait_for(index + 1):
                break
            control.on_episode(
                EpisodeResult(
                    index + 1,
                    traj.food_seeds[index],
                    traj.scores[index],
                    traj.rewards[index],
                    traj.steps[index],
                    traj.outcomes[index],
                    traj.epsilons[index],
                    0,
                    traj.losses[index],
                )
            )
            completed = index + 1
            if completed < episodes and pacer.checkpoint():
                break
        return completed

    @staticmethod
    def _result(traj: _Trajectory, completed: int, rng: np.random.Generator) -> TrainResult:
        if completed == 0:
            return TrainResult(0, None, 0, 0.0)
        scores = traj.scores[:completed]
        best = max(range(completed), key=scores.__getitem__)
        losses = [loss for loss in traj.losses[:completed] if loss is not None]
        return TrainResult(
            episodes_completed=completed,
            high_score=scores[best],
            total_steps=sum(traj.steps[:completed]),
            total_reward=float(sum(traj.rewards[:completed])),
            best_snapshot=_snapshot(best + 1, traj.steps[best], scores[best], rng),
            last_loss=losses[-1] if losses else None,
        )
