"""The runs this server process holds: their live state, the FIFO queue, and status objects.

One ``RunBook`` is shared by the control thread (requests) and the worker thread (training);
a single condition variable guards every field of every run and the queue, so a status object
is always one consistent picture. Only runs submitted to this process are known: after a
restart the book is empty and every lookup answers ``run_not_found``.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from snakelab.envelope import RequestRefused
from snakelab.run_store import finite_or_none, utc_now
from snakelab.trainers.base import EpisodeBatch, EpisodeResult

TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass
class Run:
    """One submitted run and everything its status object reports."""

    run_id: str
    # The complete config until the run ends; released then (the database keeps it).
    config: dict[str, Any] | None
    epochs: int
    created_at: datetime
    state: str = "queued"
    completed_epochs: int = 0
    total_steps: int = 0
    high_score: int | None = None
    total_reward: float = 0.0
    epsilon_injections: int = 0
    last_loss: float | None = None
    last_episode: EpisodeResult | None = None
    error: str | None = None
    snapshot: dict[str, Any] | None = None
    stop_requested: bool = False  # cancel (or server shutdown) asked the trainer to stop
    started_at: datetime | None = None
    completed_at: datetime | None = None

    def record(self, episode: EpisodeResult) -> None:
        """Fold one finished episode into the run's totals."""
        self.completed_epochs = episode.episode
        self.total_steps += episode.steps
        self.total_reward += episode.reward
        self.epsilon_injections += episode.epsilon_injections
        if episode.loss is not None:
            self.last_loss = episode.loss
        if self.high_score is None or episode.score > self.high_score:
            self.high_score = episode.score
        self.last_episode = episode

    def record_batch(self, batch: EpisodeBatch) -> None:
        """Fold consecutive episodes into the totals: the same as ``record`` for each."""
        if not len(batch):
            return
        self.completed_epochs = batch.first + len(batch) - 1
        self.total_steps += sum(batch.steps)
        total_reward = self.total_reward
        for reward in batch.rewards:  # added one by one, exactly as ``record`` adds them
            total_reward += reward
        self.total_reward = total_reward
        self.epsilon_injections += sum(batch.epsilon_injections)
        for loss in reversed(batch.losses):
            if loss is not None:
                self.last_loss = loss
                break
        best = max(batch.scores)
        if self.high_score is None or best > self.high_score:
            self.high_score = best
        self.last_episode = batch.result(len(batch) - 1)

    def status(self) -> dict[str, Any]:
        """The contract's status object."""
        last = self.last_episode
        status: dict[str, Any] = {
            "run_id": self.run_id,
            "state": self.state,
            "epochs": self.epochs,
            "completed_epochs": self.completed_epochs,
            "total_steps": self.total_steps,
            "high_score": self.high_score,
            "total_reward": finite_or_none(self.total_reward) or 0.0,
            "epsilon_injections": self.epsilon_injections,
            "last_loss": finite_or_none(self.last_loss),
            # Moves are not slowed down for viewers here: no telemetry stream to pace.
            "move_delay_ms": 0.0,
            "last_episode": None
            if last is None
            else {
                "episode": last.episode,
                "seed": last.seed,
                "score": last.score,
                "reward": finite_or_none(last.reward) or 0.0,
                "steps": last.steps,
                "outcome": last.outcome,
                "epsilon": finite_or_none(last.epsilon),
                "epsilon_injections": last.epsilon_injections,
                "loss": finite_or_none(last.loss),
            },
        }
        if self.error is not None:
            status["error"] = self.error
        return status


@dataclass
class RunBook:
    """Every run of this process, the FIFO queue, and the lock that guards them."""

    runs: dict[str, Run] = field(default_factory=dict)
    queue: deque[Run] = field(default_factory=deque)
    changed: threading.Condition = field(default_factory=threading.Condition)
    current: Run | None = None  # the run on the worker (running, paused or cancelling)
    closing: bool = False

    def add(self, run: Run) -> int:
        """Queue ``run`` behind every earlier one; returns its 1-based place among queued runs."""
        with self.changed:
            self.runs[run.run_id] = run
            self.queue.append(run)
            self.changed.notify_all()
            return len(self.queue)

    def get(self, run_id: str) -> Run:
        """The run, or ``run_not_found`` (also for every run of an earlier server process)."""
        run = self.runs.get(run_id)
        if run is None:
            raise RequestRefused("run_not_found", f"no run {run_id} in this server process")
        return run

    def active(self) -> Run | None:
        """The run on the worker, else the first queued one, else None."""
        with self.changed:
            if self.current is not None:
                return self.current
            return self.queue[0] if self.queue else None

    def next_run(self) -> Run | None:
        """Block until a run is queued and hand it to the worker as running; None when closing."""
        with self.changed:
            while not self.queue and not self.closing:
                self.changed.wait()
            if self.closing:
                return None
            run = self.queue.popleft()
            run.state = "running"
            run.started_at = utc_now()
            self.current = run
            self.changed.notify_all()
            return run

    def close(self) -> list[Run]:
        """Stop handing out runs; ask the current one to stop; returns the runs never started."""
        with self.changed:
            self.closing = True
            if self.current is not None:
                self.current.stop_requested = True
            abandoned = list(self.queue)
            self.queue.clear()
            self.changed.notify_all()
            return abandoned
