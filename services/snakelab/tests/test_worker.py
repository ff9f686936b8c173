"""The worker and its database writes, with scripted trainers, against a real database."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing
from typing import Any

import pytest
from snakelab_harness import new_run, store_settings

from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.waiting import wait_until
from ax3l.testing.databases import TestDatabases as Databases
from snakelab.run_store import RunStore, _values_fast
from snakelab.runs import TERMINAL, Run, RunBook
from snakelab.trainers.base import EpisodeBatch, EpisodeResult, RunControl, TrainResult
from snakelab.worker import SLOW_EPISODE_SECONDS, Worker


def episode(number: int, score: int) -> EpisodeResult:
    return EpisodeResult(
        episode=number,
        seed=number,
        score=score,
        reward=float(score),
        steps=10 * number,
        outcome="wall",
        epsilon=0.5,
        epsilon_injections=1,
        loss=None if number == 1 else 0.25,
    )


class ScriptedTrainer:
    """Plays ``script(config, control)`` as its training."""

    name = "scripted"

    def __init__(self, script: Callable[[dict[str, Any], RunControl], TrainResult]):
        self.script = script

    def run(self, config: dict[str, Any], control: RunControl) -> TrainResult:
        return self.script(config, control)


class Harness:
    def __init__(
        self,
        databases: Databases,
        trainer: Any,
        store: RunStore | None = None,
        on_ended: Callable[[Run], None] | None = None,
    ):
        self.databases = databases
        self.store = store or RunStore(store_settings(databases), "test")
        self.book = RunBook()
        self.worker = Worker(self.book, self.store, trainer, on_ended)
        self.worker.start()

    def submit(self, **partial: Any) -> Run:
        run = new_run(self.store, **partial)
        self.book.add(run)
        return run

    def wait_terminal(self, run: Run) -> None:
        wait_until(lambda: run.state in TERMINAL, 20, f"run {run.run_id} to end", interval=0.01)

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], ...]:
        """Rows of one SELECT in SnakeLab's database, as the SnakeLab user."""
        return tuple(self.databases.query(sql, args, user="snakelab"))

    def row(self, run_id: str) -> tuple[Any, ...]:
        (found,) = self.query(
            "SELECT status, episode_count, high_score, error_message,"
            " high_score_snapshot IS NOT NULL,"
            " (SELECT COUNT(*) FROM simulation_episodes e WHERE e.run_id = r.run_id)"
            " FROM simulation_runs r WHERE run_id = %s",
            (run_id,),
        )
        return found

    def episodes(self, run_id: str) -> tuple[tuple[Any, ...], ...]:
        """(episode, score, steps, epsilon, loss) of every stored episode of the run."""
        return self.query(
            "SELECT episode, score, steps, epsilon, loss FROM simulation_episodes"
            " WHERE run_id = %s ORDER BY episode",
            (run_id,),
        )

    def close(self) -> None:
        self.book.close()
        self.worker.join(10)
        self.store.close()


@pytest.fixture
def harness_for(snakelab_tables: Databases) -> Iterator[Callable[..., Harness]]:
    """``Harness(snakelab_tables, trainer, store, on_ended)``, each closed after the test."""
    with ExitStack() as made:
        yield lambda *args: made.enter_context(closing(Harness(snakelab_tables, *args)))


def test_slow_episodes_reach_the_database_one_by_one(
    harness_for: Callable[..., Harness],
) -> None:
    """With episodes slower than the batching threshold, each is stored as soon as it ends."""
    seen_in_db: list[int] = []
    harness: Harness

    def script(config: dict[str, Any], control: RunControl) -> TrainResult:
        for number in range(1, 6):
            control.checkpoint()
            time.sleep(SLOW_EPISODE_SECONDS * 2)  # this trainer's "training" of one episode
            control.on_episode(episode(number, score=number))

            def stored(number: int = number) -> bool:
                return bool(harness.row(run.run_id)[1] == number)

            wait_until(
                stored,
                5,
                f"episode {number} to be stored",
                interval=0.005,
            )
            seen_in_db.append(number)
        return TrainResult(5, 5, 150, 15.0, {"version": 1, "episode": 5})

    harness = harness_for(ScriptedTrainer(script))
    run = harness.submit(epochs=500)
    harness.wait_terminal(run)
    assert seen_in_db == [1, 2, 3, 4, 5]
    assert run.state == "completed"  # the trainer decides how many episodes a run has
    assert harness.row(run.run_id) == ("completed", 5, 5, None, 1, 5)


def test_a_trainer_crash_fails_the_run_and_keeps_its_episodes(
    harness_for: Callable[..., Harness],
) -> None:
    """An exception in the trainer ends the run failed with the reason; the worker goes on."""

    def script(config: dict[str, Any], control: RunControl) -> TrainResult:
        if config["seed"] == 1:
            control.on_episode(episode(1, score=3))
            control.on_episode(episode(2, score=7))
            raise FloatingPointError("loss exploded")
        control.on_episode(episode(1, score=1))
        return TrainResult(1, 1, 10, 1.0)

    harness = harness_for(ScriptedTrainer(script))
    crashed = harness.submit(seed=1)
    after = harness.submit(seed=2)
    harness.wait_terminal(after)
    assert crashed.state == "failed"
    assert crashed.error == "trainer scripted failed: FloatingPointError('loss exploded')"
    assert harness.row(crashed.run_id) == ("failed", 2, 7, crashed.error, 0, 2)
    assert after.state == "completed"


def test_nan_losses_are_stored_as_null(harness_for: Callable[..., Harness]) -> None:
    """A non-finite loss or epsilon reaches neither the status nor the database as NaN."""

    def script(config: dict[str, Any], control: RunControl) -> TrainResult:
        bad = EpisodeResult(1, 1, 2, float("nan"), 5, "snake", float("inf"), 0, float("nan"))
        control.on_episode(bad)
        return TrainResult(1, 2, 5, 0.0)

    harness = harness_for(ScriptedTrainer(script))
    run = harness.submit()
    harness.wait_terminal(run)
    status = run.status()
    assert status["last_loss"] is None
    assert status["last_episode"]["loss"] is None
    assert status["last_episode"]["epsilon"] is None
    assert [row[3:] for row in harness.episodes(run.run_id)] == [(None, None)]


def test_batches_are_stored_and_reported_like_single_episodes(
    harness_for: Callable[..., Harness],
) -> None:
    """on_episodes gives the same rows, counters and status as on_episode for each episode."""
    results = [episode(n, score=(n * 7) % 11) for n in range(1, 41)]
    results[5] = EpisodeResult(6, 6, 4, 1.5, 60, "snake", 1e-05, 0, float("nan"))
    results[6] = EpisodeResult(7, 7, 2, -2.0, 70, "max_moves", None, 0, 123456.789)
    batch = EpisodeBatch(
        first=1,
        seeds=[r.seed for r in results],
        scores=[r.score for r in results],
        rewards=[r.reward for r in results],
        steps=[r.steps for r in results],
        outcomes=[r.outcome for r in results],
        epsilons=[r.epsilon for r in results],
        epsilon_injections=[r.epsilon_injections for r in results],
        losses=[r.loss for r in results],
    )

    def script(config: dict[str, Any], control: RunControl) -> TrainResult:
        if config["seed"] == 1:
            for result in results:
                control.on_episode(result)
        else:
            control.on_episodes(batch)
        return TrainResult(40, 10, 0, 0.0)

    harness = harness_for(ScriptedTrainer(script))
    single, batched = harness.submit(seed=1), harness.submit(seed=2)
    harness.wait_terminal(batched)
    assert single.state == batched.state == "completed"
    assert {**single.status(), "run_id": None} == {**batched.status(), "run_id": None}
    assert (
        harness.row(single.run_id)
        == harness.row(batched.run_id)
        == ("completed", 40, 10, None, 0, 40)
    )
    stored = [harness.episodes(run.run_id) for run in (single, batched)]
    assert stored[0] == stored[1]
    assert stored[0][5] == (6, 4, 60, 1e-05, None) and stored[0][6] == (7, 2, 70, None, 123456.789)


def test_the_fast_episode_text_falls_back_for_anything_but_plain_numbers() -> None:
    """Only ints, finite floats and None take the JSON-encoder path; the rest is refused."""
    assert _values_fast([(1, 2, 3, 0.5, None), (2, 0, 9, 1e-07, 2.5)]) == (
        "(@run_id,1,2,3,0.5,NULL),(@run_id,2,0,9,1e-07,2.5)"
    )
    for bad in (float("nan"), float("inf"), "1); DROP TABLE x; --", True, object()):
        assert _values_fast([(1, 2, 3, 0.5, bad)]) is None  # type: ignore[list-item]


def test_a_value_that_is_no_number_fails_the_run_and_the_next_one_runs(
    harness_for: Callable[..., Harness],
) -> None:
    """A trainer reporting a non-number never reaches the database; its run ends failed."""

    def script(config: dict[str, Any], control: RunControl) -> TrainResult:
        loss: Any = "not a number" if config["seed"] == 1 else 0.5
        control.on_episodes(EpisodeBatch(1, [1], [3], [1.0], [10], ["wall"], [0.5], [0], [loss]))
        return TrainResult(1, 3, 10, 1.0)

    harness = harness_for(ScriptedTrainer(script))
    broken, after = harness.submit(seed=1), harness.submit(seed=2)
    harness.wait_terminal(after)
    assert broken.state == "failed"
    assert broken.error is not None and broken.error.startswith("could not store episodes")
    assert harness.row(broken.run_id)[0::3] == ("failed", broken.error)
    assert after.state == "completed" and harness.row(after.run_id)[5] == 1


class SecondEndFirstStore(RunStore):
    """A real store that holds the first run's end until the second run's end is stored."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.inserted: list[str] = []
        self.finished: list[str] = []
        self.second_stored = threading.Event()

    def insert_run(self, run_id: str, *args: Any, **kwargs: Any) -> None:
        self.inserted.append(run_id)
        super().insert_run(run_id, *args, **kwargs)

    def finish(self, run_id: str, *args: Any, **kwargs: Any) -> None:
        if run_id == self.inserted[0]:
            self.second_stored.wait(3)  # with one writer this only times out
        super().finish(run_id, *args, **kwargs)
        self.finished.append(run_id)
        if len(self.inserted) > 1 and run_id == self.inserted[1]:
            self.second_stored.set()


def test_runs_end_in_submission_order_when_writers_store_them_out_of_order(
    harness_for: Callable[..., Harness], snakelab_tables: Databases
) -> None:
    """Two writers store consecutive runs at once; runs still turn terminal and are announced
    in submission order, and every row is complete."""
    terminal_when_announced: list[tuple[str, list[str]]] = []
    runs: list[Run] = []

    def on_ended(run: Run) -> None:
        # What a client would see at this moment: every run's state, in submission order.
        terminal_when_announced.append((run.run_id, [r.state for r in runs]))

    def script(config: dict[str, Any], control: RunControl) -> TrainResult:
        control.on_episode(episode(1, score=config["seed"]))
        return TrainResult(1, config["seed"], 10, 1.0)

    store = SecondEndFirstStore(store_settings(snakelab_tables), "test")
    harness = harness_for(ScriptedTrainer(script), store, on_ended)
    runs.extend(harness.submit(seed=i) for i in range(1, 6))
    harness.wait_terminal(runs[-1])
    wait_until(lambda: len(terminal_when_announced) == len(runs), 5, "every run announced")
    assert store.finished[:2] == [runs[1].run_id, runs[0].run_id]  # stored second first...
    assert [run_id for run_id, _ in terminal_when_announced] == [r.run_id for r in runs]
    for index, (_, states) in enumerate(terminal_when_announced):
        assert all(state == "completed" for state in states[: index + 1])  # ...yet ended second
    assert [harness.row(r.run_id) for r in runs] == [
        ("completed", 1, seed, None, 0, 1) for seed in range(1, 6)
    ]


class SlowEndStore(RunStore):
    """A real store whose terminal writes take a while, so later writes queue up behind them."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.starts_alone = 0

    def mark_running(self, run_id: str, started_at: Any) -> None:
        self.starts_alone += 1
        super().mark_running(run_id, started_at)

    def finish(self, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.05)
        super().finish(*args, **kwargs)


def test_a_start_queued_behind_other_writes_is_stored_with_the_runs_next_write(
    harness_for: Callable[..., Harness], snakelab_tables: Databases
) -> None:
    """Under a backlog the start rides in the run's next transaction; every row is complete."""

    def script(config: dict[str, Any], control: RunControl) -> TrainResult:
        control.on_episode(episode(1, score=2))
        return TrainResult(1, 2, 10, 2.0)

    store = SlowEndStore(store_settings(snakelab_tables), "test")
    harness = harness_for(ScriptedTrainer(script), store)
    runs = [harness.submit(seed=i) for i in range(1, 7)]
    harness.wait_terminal(runs[-1])
    assert store.starts_alone < len(runs)  # the first run's start, at least, was alone
    rows = harness.query(
        "SELECT status, episode_count, started_at IS NOT NULL,"
        " started_at <= completed_at FROM simulation_runs ORDER BY id"
    )
    assert rows == (("completed", 1, 1, 1),) * len(runs)


class FailingProgressStore(RunStore):
    """A real store whose second progress write fails, as when the database goes away."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.progress_writes = 0

    def write_progress(self, *args: Any, **kwargs: Any) -> None:
        self.progress_writes += 1
        if self.progress_writes == 2:
            raise DatabaseError("recording episodes: database unavailable (2013: Lost connection)")
        super().write_progress(*args, **kwargs)


def test_a_failed_write_stops_and_fails_the_run(
    harness_for: Callable[..., Harness], snakelab_tables: Databases
) -> None:
    """When storing progress fails, the trainer is stopped and the run ends failed with why."""

    def script(config: dict[str, Any], control: RunControl) -> TrainResult:
        for number in range(1, 200):
            if control.checkpoint():
                return TrainResult(number - 1, 1, 0, 0.0)
            time.sleep(SLOW_EPISODE_SECONDS * 2)
            control.on_episode(episode(number, score=1))
        return TrainResult(199, 1, 0, 0.0)

    store = FailingProgressStore(store_settings(snakelab_tables), "test")
    harness = harness_for(ScriptedTrainer(script), store)
    run = harness.submit()
    harness.wait_terminal(run)
    assert run.state == "failed"
    assert run.error is not None and "Lost connection" in run.error
    assert run.completed_epochs < 199
    assert harness.row(run.run_id)[0] == "failed"


def test_an_unstorable_snapshot_fails_the_run_instead_of_hanging_it(
    harness_for: Callable[..., Harness],
) -> None:
    """A snapshot that is not JSON ends the run failed, stored, and the next run still runs."""

    def script(config: dict[str, Any], control: RunControl) -> TrainResult:
        control.on_episode(episode(1, score=4))
        snapshot = {"version": 1, "board": {"score": float("nan")}} if config["seed"] == 1 else None
        return TrainResult(1, 4, 10, 4.0, snapshot)

    harness = harness_for(ScriptedTrainer(script))
    broken = harness.submit(seed=1)
    runs = [harness.submit(seed=2 + i) for i in range(3)]  # more than the runs in flight
    for run in runs:
        harness.wait_terminal(run)
    assert broken.state == "failed"
    assert broken.error is not None and "could not store the run's end" in broken.error
    assert harness.row(broken.run_id)[:4] == ("failed", 1, 4, broken.error)
    assert [run.state for run in runs] == ["completed"] * 3
