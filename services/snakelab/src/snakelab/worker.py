"""The worker thread: runs queued simulations one at a time, in submission order.

Database writes of a run go through a ``StoreWriter`` thread that applies them in order behind
the trainer: while the database stores the end of one run, the worker already trains the
next. There are ``WRITERS`` writers with a connection each, taking consecutive runs in turn,
so the database can store two runs at once while a third trains. A run turns terminal in
memory (and over the socket) only once its terminal state is committed, and only after the
run submitted before it, so a client that sees ``completed`` finds the finished row and runs
end, and are announced, in submission order; until then a run still reports ``running``.

``RunDriver`` is the ``RunControl`` a trainer sees. It folds every episode into the run's
status at once and batches the episode rows, so a 0-second surrogate run costs a few
transactions instead of 1500:

* when episodes arrive slower than ``SLOW_EPISODE_SECONDS`` apart (the real trainer), each
  episode is written as soon as it ends, so ``episode_count`` and ``high_score`` in the
  database follow the run episode by episode;
* when they arrive faster, they are written at least every ``FLUSH_SECONDS``;
* always before the run blocks on a pause, and with the terminal state at the end.

During a database outage the writers retry their write until it lands (``run_store.py``):
the queue fills, the trainer blocks on it and so waits in place, and the run goes on where it
was once the database is back. Only a write that no wait can fix fails its run.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

from ax3l.shared.db.errors import DatabaseError
from snakelab.run_store import STOPPED_MESSAGE, EpisodeRow, EpisodeSql, RunStore, utc_now
from snakelab.runs import Run, RunBook
from snakelab.trainers.base import EpisodeBatch, EpisodeResult, Trainer

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.05
SLOW_EPISODE_SECONDS = 0.005
# Writes waiting for the database at most; the worker blocks beyond (bounded memory).
WRITE_QUEUE_DEPTH = 8
# Writer threads, each with its own connection: consecutive runs are stored by different
# writers, so the database can store two runs at once (each run's writes stay in order on
# its writer, and runs still turn terminal in submission order).
WRITERS = 2
# Runs started but not yet stored: the one training and one per writer.
RUNS_IN_FLIGHT = WRITERS + 1

# Called with a run whose terminal state is stored (the events publisher listens here).
EndedListener = Callable[[Run], None]


class StoreWriter(threading.Thread):
    """Applies queued database writes in order, one at a time."""

    def __init__(self, number: int = 0) -> None:
        super().__init__(name=f"snakelab-store-writer-{number}", daemon=True)
        self.writes: queue.Queue[Callable[[], None] | None] = queue.Queue(WRITE_QUEUE_DEPTH)

    def put(self, write: Callable[[], None]) -> None:
        self.writes.put(write)

    def run(self) -> None:
        while (write := self.writes.get()) is not None:
            try:
                write()
            except Exception:  # a write must never take the writer down
                log.exception("database write failed")

    def close(self) -> None:
        """Apply every queued write, then stop."""
        if self.is_alive():
            self.writes.put(None)
            self.join()


class RunDriver:
    """The ``RunControl`` of one run: status updates, batched episode writes, pause, stop."""

    def __init__(
        self,
        run: Run,
        book: RunBook,
        store: RunStore,
        writer: StoreWriter,
        previous: threading.Event | None = None,
    ):
        self.run = run
        self.book = book
        self.store = store
        self.writer = writer
        self.released: Callable[[], None] | None = None  # called once the end is stored
        # Set once this run is terminal in memory; the next run waits for it to turn terminal
        # (its writer may finish first), so runs end, and are announced, in submission order.
        self.settled = threading.Event()
        self.previous = previous
        self.rows: list[EpisodeRow] = []
        # Set by the writer thread when a write of this run failed: the run stops and fails.
        self.write_error: str | None = None
        # The run's start, when the writer folds it into this run's next write (writer thread).
        self.start_pending: datetime | None = None
        now = time.monotonic()
        self.last_flush = now
        self.last_episode_at = now

    # -- RunControl (worker thread) -----------------------------------------------------------

    def on_episode(self, result: EpisodeResult) -> None:
        with self.book.changed:
            self.run.record(result)
        self.rows.append((result.episode, result.score, result.steps, result.epsilon, result.loss))
        self._maybe_flush()

    def on_episodes(self, batch: EpisodeBatch) -> None:
        with self.book.changed:
            self.run.record_batch(batch)
        first = batch.first
        self.rows.extend(
            zip(
                range(first, first + len(batch)),
                batch.scores,
                batch.steps,
                batch.epsilons,
                batch.losses,
                strict=True,
            )
        )
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        now = time.monotonic()
        slow = now - self.last_episode_at >= SLOW_EPISODE_SECONDS
        self.last_episode_at = now
        if slow or now - self.last_flush >= FLUSH_SECONDS:
            self.flush()

    def checkpoint(self) -> bool:
        run = self.run
        if run.stop_requested or self.write_error is not None:
            return True
        if run.state != "paused":
            return False
        self.flush()
        with self.book.changed:
            while run.state == "paused" and not run.stop_requested:
                self.book.changed.wait()
            return run.stop_requested

    # -- worker thread --------------------------------------------------------------------------

    def start(self) -> None:
        self.writer.put(partial(self._write_start, self.run.started_at or utc_now()))

    def flush(self) -> None:
        """Queue the buffered episodes and the run's current counters for writing."""
        if not self.rows:
            return
        rows, self.rows = self.rows, []
        with self.book.changed:
            count, high = self.run.completed_epochs, self.run.high_score
        # A row the SQL cannot be made of raises here, inside the trainer: the run fails.
        episodes = EpisodeSql.build(self.run.run_id, rows)
        self.writer.put(partial(self._write_progress, episodes, count, high))
        self.last_flush = time.monotonic()

    def end(
        self,
        state: str,
        error: str | None,
        snapshot: dict[str, Any] | None,
        on_ended: EndedListener | None,
    ) -> None:
        """Queue the terminal write; the run turns terminal in memory once it is stored."""
        # The run ends now, before the next one starts, however late the write lands.
        completed_at = utc_now()
        rows, self.rows = self.rows, []
        with self.book.changed:
            count, high = self.run.completed_epochs, self.run.high_score
        try:
            episodes = EpisodeSql.build(self.run.run_id, rows)
        except Exception as exc:  # a trainer's value that is not a number
            log.exception("could not store the last episodes of run %s", self.run.run_id)
            state, snapshot = "failed", None
            error = f"could not store episodes: {exc!r}"
            episodes = EpisodeSql(())
        self.writer.put(
            partial(
                self._write_end,
                state,
                error,
                snapshot,
                episodes,
                count,
                high,
                completed_at,
                on_ended,
            )
        )

    # -- writer thread --------------------------------------------------------------------------

    def _write_start(self, started_at: datetime) -> None:
        if self.writer.writes.qsize():
            # Behind this write waits only this run's own (the next run starts after this
            # one's end is queued): store the start with it, one transaction fewer.
            self.start_pending = started_at
            return
        try:
            self.store.mark_running(self.run.run_id, started_at)
        except DatabaseError as exc:
            self.write_error = str(exc)
        except Exception as exc:
            log.exception("could not store the start of run %s", self.run.run_id)
            self.write_error = f"could not store the run's start: {exc!r}"

    def _write_progress(self, rows: EpisodeSql, count: int, high: int | None) -> None:
        if self.write_error is not None:
            return
        try:
            self.store.write_progress(self.run.run_id, rows, count, high, self.start_pending)
            self.start_pending = None
        except DatabaseError as exc:
            self.write_error = str(exc)
        except Exception as exc:
            log.exception("could not store episodes of run %s", self.run.run_id)
            self.write_error = f"could not store episodes: {exc!r}"

    def _write_end(
        self,
        state: str,
        error: str | None,
        snapshot: dict[str, Any] | None,
        rows: EpisodeSql,
        count: int,
        high: int | None,
        completed_at: datetime,
        on_ended: EndedListener | None,
    ) -> None:
        run = self.run
        try:
            try:
                if self.write_error is not None:
                    state, error, snapshot = "failed", self.write_error, None
                try:
                    self.store.finish(
                        run.run_id,
                        state,
                        rows,
                        count,
                        high,
                        completed_at,
                        error,
                        snapshot,
                        self.start_pending,
                    )
                except DatabaseError as exc:
                    # Not an outage (the store waits those out) or given up at shutdown: the
                    # row keeps a non-terminal status; the next startup marks it failed.
                    log.error("could not store the end of run %s: %s", run.run_id, exc)
                    state, error, snapshot = "failed", str(exc), None
                except Exception as exc:  # e.g. a trainer's snapshot that is not JSON
                    log.exception("could not store the end of run %s", run.run_id)
                    error = f"could not store the run's end: {exc!r}"
                    state, snapshot = "failed", None
                    self._store_failure(rows, count, high, completed_at, error)
                if self.previous is not None:
                    self.previous.wait()  # the run before ends first (another writer stores it)
                self._settle(state, error, snapshot, count, high, completed_at)
            finally:
                if self.released is not None:
                    self.released()
            if on_ended is not None:
                on_ended(run)
        finally:
            self.settled.set()

    def _store_failure(
        self,
        rows: EpisodeSql,
        count: int,
        high: int | None,
        completed_at: datetime,
        error: str,
    ) -> None:
        try:
            self.store.finish(
                self.run.run_id,
                "failed",
                rows,
                count,
                high,
                completed_at,
                error,
                started_at=self.start_pending,
            )
        except Exception:
            log.exception("could not store run %s as failed either", self.run.run_id)

    def _settle(
        self,
        state: str,
        error: str | None,
        snapshot: dict[str, Any] | None,
        count: int,
        high: int | None,
        completed_at: datetime,
    ) -> None:
        """The run's terminal state in memory (its row is written)."""
        run = self.run
        with self.book.changed:
            run.state = state
            run.error = error
            run.snapshot = snapshot
            run.completed_at = completed_at
            run.config = None  # the database holds it now
            if self.book.current is run:
                self.book.current = None
            self.book.changed.notify_all()
        log.info("run %s %s after %d episodes (high score %s)", run.run_id, state, count, high)


class Worker(threading.Thread):
    """Takes runs off the FIFO queue and trains them, one at a time."""

    def __init__(
        self,
        book: RunBook,
        store: RunStore,
        trainer: Trainer,
        on_ended: EndedListener | None = None,
    ):
        super().__init__(name="snakelab-worker", daemon=True)
        self.book = book
        self.store = store
        self.trainer = trainer
        self.on_ended = on_ended
        self.writers = [StoreWriter(number) for number in range(WRITERS)]
        self.in_flight = threading.BoundedSemaphore(RUNS_IN_FLIGHT)
        self.runs_started = 0
        self.last_settled: threading.Event | None = None

    def run(self) -> None:
        for writer in self.writers:
            writer.start()
        try:
            while True:
                # Taken before the run leaves the queue: a waiting run stays queued.
                self.in_flight.acquire()
                run = self.book.next_run()
                if run is None:
                    self.in_flight.release()
                    return
                self.execute(run)
        finally:
            for writer in self.writers:
                writer.close()

    def execute(self, run: Run) -> None:
        """Train ``run`` and queue its terminal state; never raises."""
        writer = self.writers[self.runs_started % len(self.writers)]
        self.runs_started += 1
        driver = RunDriver(run, self.book, self.store, writer, self.last_settled)
        self.last_settled = driver.settled
        driver.released = self.in_flight.release
        driver.start()
        error: str | None = None
        snapshot: dict[str, Any] | None = None
        try:
            if run.config is None:
                raise RuntimeError("the run's config was already released")
            result = self.trainer.run(run.config, driver)
        except Exception as exc:
            log.exception("run %s failed in trainer %s", run.run_id, self.trainer.name)
            state, error = "failed", f"trainer {self.trainer.name} failed: {exc!r}"
        else:
            with self.book.changed:
                stopped_early = run.stop_requested and run.completed_epochs < run.epochs
                closing = self.book.closing
            if not stopped_early:
                state, snapshot = "completed", result.best_snapshot
            elif closing:
                state, error = "failed", STOPPED_MESSAGE
            else:
                state = "cancelled"
        driver.end(state, error, snapshot, self.on_ended)
