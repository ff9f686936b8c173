"""Helpers of the SnakeLab suite (imported by bare name through pytest's ``pythonpath``): a
RunControl that records what a trainer reports, and the run store's login and new runs."""

from __future__ import annotations

import uuid
from typing import Any

from ax3l.shared.config_schema import load_schema
from ax3l.testing.databases import TestDatabases
from snakelab.config_rules import complete_config, config_hash
from snakelab.run_store import DbSettings, RunStore, utc_now
from snakelab.runs import Run
from snakelab.trainers.base import EpisodeBatch, EpisodeResult

SCHEMA = load_schema()


class RecordingControl:
    """A RunControl that records episodes and says stop after ``stop_after`` checkpoints."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.episodes: list[EpisodeResult] = []
        self.calls: list[int] = []  # episodes per on_episode(s) call
        self.checkpoints = 0
        self.stop_after = stop_after

    def on_episode(self, result: EpisodeResult) -> None:
        self.episodes.append(result)
        self.calls.append(1)

    def on_episodes(self, batch: EpisodeBatch) -> None:
        self.episodes.extend(batch.results())
        self.calls.append(len(batch))

    def checkpoint(self) -> bool:
        self.checkpoints += 1
        return self.stop_after is not None and self.checkpoints >= self.stop_after


def store_settings(databases: TestDatabases) -> DbSettings:
    """The run store's login: SnakeLab's user on the test's SnakeLab database."""
    d = databases
    return DbSettings(d.host, d.port, d.snakelab_user, d.snakelab_password, d.snakelab_db)


def new_run(store: RunStore, **partial: Any) -> Run:
    """A run of ``partial`` completed with the defaults, stored queued as a submit stores it."""
    config = complete_config(SCHEMA, partial)
    run = Run(str(uuid.uuid4()), config, int(config["epochs"]), utc_now())
    store.insert_run(run.run_id, config_hash(config), SCHEMA.flatten(config), run.created_at)
    return run
