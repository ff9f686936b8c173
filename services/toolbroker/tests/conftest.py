"""Fixtures for the toolbroker suite: one reference SnakeLab per module, a golden
configuration on a fresh seed per test, and an in-process broker on a real socket."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from broker_harness import (
    SCHEMA,
    Lab,
    RunningBroker,
    next_seed,
    running_broker,
    write_golden,
)

from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.testing.databases import TestDatabases, admin_connection
from ax3l.testing.snakelab_process import SnakeLabProcess, scratch_snakelab_database


@pytest.fixture(scope="module")
def module_snakelab(db_env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """The reference SnakeLab (surrogate trainer, instant runs) on a scratch database that
    Ax3l's user may SELECT from; yields (endpoint, database name)."""
    with scratch_snakelab_database(db_env) as scratch:
        admin = admin_connection(db_env)
        grant = f"`{scratch.name}`.* TO '{db_env['DB_USER']}'@'%'"
        try:
            with admin.cursor() as cur:
                cur.execute(f"GRANT SELECT ON {grant}")
            with SnakeLabProcess(scratch.env(), trainer="surrogate", seconds=0) as process:
                yield process.endpoint, scratch.name
        finally:
            with admin.cursor() as cur:
                cur.execute(f"REVOKE SELECT ON {grant.replace(' TO ', ' FROM ')}")
            admin.close()


@pytest.fixture
def lab(databases: TestDatabases, module_snakelab: tuple[str, str]) -> Lab:
    """The module's SnakeLab as seen from this test's databases."""
    endpoint, db_name = module_snakelab
    return Lab(endpoint, db_name, databases)


@pytest.fixture
async def golden(databases: TestDatabases, lab: Lab) -> dict[str, Any]:
    """SnakeLab's default configuration on a fresh seed, submitted once and made golden."""
    config = SCHEMA.with_values(SCHEMA.default_config(), {"seed": next_seed()})
    reply = await SnakeLabClient(lab.endpoint, timeout=5).submit(config)
    await write_golden(databases, reply.run_id, config)
    return {"run_id": reply.run_id, "config": config}


@pytest.fixture
async def broker(databases: TestDatabases, lab: Lab) -> AsyncIterator[RunningBroker]:
    """A broker in this test's event loop, wired to the module's SnakeLab."""
    async with running_broker(databases, lab.endpoint, lab.db_name) as running:
        yield running
