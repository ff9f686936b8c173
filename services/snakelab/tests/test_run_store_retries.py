"""Retried writes against a real database, with connections that die at scripted moments."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, closing
from typing import Any

import pymysql
import pytest
from snakelab_harness import new_run, store_settings

from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.waiting import wait_until
from ax3l.testing.databases import TestDatabases as Databases
from snakelab.run_store import UNCONFIRMED_MESSAGE, RunStore
from snakelab.runs import TERMINAL, RunBook
from snakelab.trainers.base import EpisodeResult, RunControl, TrainResult
from snakelab.worker import RunDriver, Worker

LOST = pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
REFUSED = pymysql.err.OperationalError(2003, "Can't connect to MySQL server")

# What a scripted connection does with one write: "lost" (dies before the database gets it),
# "lost after commit" (the database commits, the reply never arrives), "down" (cannot connect).
Fate = str


class DyingConnectionStore(RunStore):
    """A real store whose writes meet the fates ``plan`` hands out for their description."""

    def __init__(self, databases: Databases, plan: Callable[[str], Fate | None]):
        super().__init__(store_settings(databases), "test")
        self.plan = plan
        self.doing = ""
        self.attempts: list[tuple[str, Fate | None]] = []

    def _script(self, doing: str, *statements: Any, **kwargs: Any) -> list[int]:
        self.doing = doing
        return super()._script(doing, *statements, **kwargs)

    def _send(self, statements: Sequence[Any], unconfirmed: Sequence[str]) -> list[int]:
        fate = self.plan(self.doing)
        self.attempts.append((self.doing, fate))
        if fate == "lost":
            raise LOST
        if fate == "down":
            raise REFUSED
        counts = super()._send(statements, unconfirmed)
        if fate == "lost after commit":
            raise LOST
        return counts


def fates(*script: tuple[str, Sequence[Fate]]) -> Callable[[str], Fate | None]:
    """For a write whose description starts with a prefix, its next fates in order."""
    left = {prefix: list(planned) for prefix, planned in script}

    def plan(doing: str) -> Fate | None:
        for prefix, planned in left.items():
            if doing.startswith(prefix) and planned:
                return planned.pop(0)
        return None

    return plan


def rows(databases: Databases) -> list[tuple[Any, ...]]:
    return databases.query(
        "SELECT r.run_id, r.status, r.error_message, r.episode_count,"
        " (SELECT COUNT(*) FROM configurations c WHERE c.run_id = r.run_id)"
        " FROM simulation_runs r ORDER BY r.id",
        user="snakelab",
    )


@pytest.fixture
def stores(snakelab_tables: Databases) -> Iterator[Callable[..., DyingConnectionStore]]:
    """``DyingConnectionStore(snakelab_tables, plan)``, each closed after the test."""
    with ExitStack() as made:
        yield lambda plan: made.enter_context(closing(DyingConnectionStore(snakelab_tables, plan)))


def test_a_submit_whose_commit_landed_before_the_connection_died_is_stored_once(
    stores: Callable[..., DyingConnectionStore], snakelab_tables: Databases
) -> None:
    """A retry that meets its own rows (duplicate key) knows the first attempt was committed."""
    store = stores(fates(("storing run", ["lost after commit"])))
    run = new_run(store)
    assert [fate for _, fate in store.attempts] == ["lost after commit", None]
    assert rows(snakelab_tables) == [(run.run_id, "queued", None, None, 1)]


def test_a_submit_refused_after_its_commit_may_have_landed_is_failed_once_the_database_is_back(
    stores: Callable[..., DyingConnectionStore], snakelab_tables: Databases
) -> None:
    """A refused submit leaves no row queued for ever: the next write marks it failed."""
    store = stores(fates(("storing run", ["lost after commit", *["down"] * 100])))
    with pytest.raises(DatabaseError, match="database unavailable"):
        new_run(store, seed=1)
    ((orphan, status, _, _, _),) = rows(snakelab_tables)
    assert status == "queued"  # what the database holds while it is "away"
    store.plan = fates()  # the database is back
    kept = new_run(store, seed=2)
    assert rows(snakelab_tables) == [
        (orphan, "failed", UNCONFIRMED_MESSAGE, None, 1),
        (kept.run_id, "queued", None, None, 1),
    ]


def test_control_requests_wait_for_the_database_only_briefly(
    stores: Callable[..., DyingConnectionStore],
) -> None:
    """A state change during an outage fails within the control patience, below 3 s."""
    store = stores(fates(("storing run", [])))
    run = new_run(store)
    store.plan = fates(("setting run", ["down"] * 1000))
    started = time.monotonic()
    with pytest.raises(DatabaseError, match="database unavailable"):
        store.change_state(run.run_id, "paused", ("running",))
    assert 1.0 < time.monotonic() - started < 3.0


def test_the_start_and_end_of_a_run_are_stored_whatever_the_connections_go_through(
    stores: Callable[..., DyingConnectionStore], snakelab_tables: Databases
) -> None:
    """Lost and refused connections at the start, progress and end delay a run, never fail it."""
    store = stores(
        fates(
            ("starting run", ["lost", "down", "down", "lost after commit"]),
            ("recording episodes", ["lost after commit", "down", "lost"]),
            ("finishing run", ["down", "lost", "lost after commit", "down"]),
        )
    )

    class Scripted:
        """Three episodes, each stored on its own (the driver's flush) before the next."""

        name = "scripted"

        def run(self, config: dict[str, Any], control: RunControl) -> TrainResult:
            assert isinstance(control, RunDriver)
            for number in range(1, 4):
                control.on_episode(EpisodeResult(number, number, 2, 2.0, 9, "wall", 0.5, 0, None))
                control.flush()
            return TrainResult(3, 2, 27, 6.0)

    book = RunBook()
    worker = Worker(book, store, Scripted())
    worker.start()
    try:
        run = new_run(store)
        book.add(run)
        wait_until(lambda: run.state in TERMINAL, 20, "the run to end", interval=0.01)
    finally:
        book.close()
        worker.join(10)
    assert (run.state, run.error) == ("completed", None)
    assert rows(snakelab_tables) == [(run.run_id, "completed", None, 3, 1)]
    doings = [doing.split(" run")[0] for doing, fate in store.attempts if fate is not None]
    assert doings.count("finishing") == 4
