"""The interface every SnakeLab trainer implements.

The server's worker thread calls ``Trainer.run`` once per simulation run and learns about
progress only through the ``RunControl`` callbacks, so trainers know nothing of sockets or
databases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Outcome = Literal["empty", "food", "wall", "snake", "max_moves", "board_filled"]


@dataclass(frozen=True)
class EpisodeResult:
    """What one finished episode reports (the contract's ``last_episode`` object)."""

    episode: int  # 1-based
    seed: int  # the food-placement seed of this episode
    score: int  # foods eaten
    reward: float  # summed reward of the episode
    steps: int  # moves made
    outcome: Outcome  # why the episode ended
    epsilon: float | None  # exploration rate used during the episode
    epsilon_injections: int
    loss: float | None  # loss of the gradient step after the episode, None if no batch


@dataclass(frozen=True)
class EpisodeBatch:
    """Consecutive episodes ``first``, ``first + 1``, ... as columns, reported in one call.

    For trainers that finish many episodes at once (the unpaced surrogate): the server takes
    the columns as they are, without one Python object per episode.
    """

    first: int  # 1-based episode number of the first
    seeds: list[int]
    scores: list[int]
    rewards: list[float]
    steps: list[int]
    outcomes: list[Outcome]
    epsilons: list[float | None]
    epsilon_injections: list[int]
    losses: list[float | None]

    def __len__(self) -> int:
        return len(self.scores)

    def result(self, index: int) -> EpisodeResult:
        """The ``index``-th episode of the batch (0-based) as an ``EpisodeResult``."""
        return EpisodeResult(
            self.first + index,
            self.seeds[index],
            self.scores[index],
            self.rewards[index],
            self.steps[index],
            self.outcomes[index],
            self.epsilons[index],
            self.epsilon_injections[index],
            self.losses[index],
        )

    def results(self) -> list[EpisodeResult]:
        """Every episode of the batch, in order."""
        return [self.result(index) for index in range(len(self))]


@dataclass
class TrainResult:
    """What a finished (or cancelled) run leaves behind."""

    episodes_completed: int
    high_score: int | None
    total_steps: int
    total_reward: float
    # The best game's board in the contract's snapshot JSON, or None when no episode ran.
    best_snapshot: dict[str, Any] | None = None
    last_loss: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class RunControl(Protocol):
    """How a trainer talks to the server while it runs."""

    def on_episode(self, result: EpisodeResult) -> None:
        """Called after every episode, in order; the server persists it."""

    def on_episodes(self, batch: EpisodeBatch) -> None:
        """Several finished episodes at once, in order: the same as ``on_episode`` for each."""

    def checkpoint(self) -> bool:
        """Called between episodes: blocks while paused, returns True when the run must stop."""
        ...


class Trainer(Protocol):
    """A training algorithm that turns one full, validated configuration into one run."""

    name: str

    def run(self, config: dict[str, Any], control: RunControl) -> TrainResult:
        """Train for ``config["epochs"]`` episodes (fewer if ``control.checkpoint()`` says stop)."""
        ...
