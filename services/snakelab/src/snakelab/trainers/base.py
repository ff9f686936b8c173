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

    def checkpoint(self) -> bool:
        """Called between episodes: blocks while paused, returns True when the run must stop."""
        ...


class Trainer(Protocol):
    """A training algorithm that turns one full, validated configuration into one run."""

    name: str

    def run(self, config: dict[str, Any], control: RunControl) -> TrainResult:
        """Train for ``config["epochs"]`` episodes (fewer if ``control.checkpoint()`` says stop)."""
        ...
