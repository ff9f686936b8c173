"""The store fixture of the contract suite: every test runs on MariaDB and on the in-memory twin
(Optuna's ``StorageSupplier`` pattern)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ax3l.shared.db.database import Database
from ax3l.shared.db.event_store import EventStore, MariaDBEvents
from ax3l.testing.memory_store import MemoryEvents

STORES = ["mariadb", "memory"]


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[EventStore]:
    """A fresh, empty events store: MariaDB (a scratch database) or the twin."""
    if request.param == "memory":
        yield MemoryEvents()
        return
    databases = request.getfixturevalue("databases")
    async with Database(databases.settings()) as db:
        yield MariaDBEvents(db)
