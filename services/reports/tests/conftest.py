"""Fixtures of the report server's tests: one shared database filled with the user's real runs
and a replayed history, app clients, a SnakeLab control socket stand-in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from typing import Any

import httpx
import pytest
from headless_browser import have_chromium, headless_chromium
from playwright.sync_api import Browser
from reports_history import Replay, insert_runs, read_runs, replay_history
from reports_testing import (
    Experiment,
    FakeSnakeLab,
    app_client,
    private_databases,
    reports_settings,
)

from ax3l.shared.db.database import Database
from ax3l.testing.databases import TestDatabases
from ax3l.testing.provenance import backfilled


@pytest.fixture(scope="session")
def experiment(db_env: dict[str, str]) -> Iterator[Experiment]:
    """All of the user's real runs as SnakeLab rows plus a replayed event history (read-only)."""
    with private_databases(db_env) as dbs:
        runs = read_runs()
        with closing(dbs.connect("snakelab", dbs.snakelab_db)) as connection:
            insert_runs(connection, runs)

        async def fill() -> Replay:
            async with Database(dbs.settings()) as db:
                return await replay_history(db, runs)

        replay = asyncio.run(fill())
        backfilled(dbs)  # the history's run_provenance rows, as the writers make them
        yield Experiment(dbs, runs, replay)


@pytest.fixture
def fake_snakelab() -> Iterator[FakeSnakeLab]:
    with closing(FakeSnakeLab()) as fake:
        yield fake


@pytest.fixture
def make_client() -> Any:
    """``make_client(dbs, **setting overrides)``: an async context giving an app client."""

    def make(dbs: TestDatabases, **overrides: Any) -> Any:
        return app_client(reports_settings(dbs, **overrides))

    return make


@pytest.fixture
async def client(experiment: Experiment) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client of the app over the shared experiment."""
    async with app_client(reports_settings(experiment.dbs)) as http:
        yield http


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, one per test module (the test is skipped without it)."""
    if not have_chromium():
        pytest.skip("Debian's chromium is needed")
    with headless_chromium() as chromium:
        yield chromium
