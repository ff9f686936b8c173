"""Pytest plugin shared by every suite: fresh real databases per test (``ax3l.testing.databases``),
ports, waiting.

Tests always run against the private MariaDB of ``scripts/mariadb.sh`` (``make test`` starts
it). Each test gets its own pair of databases, so suites and helpers can run side by side.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ax3l.shared.env_files import read_env_file as read_env_file  # re-exported: db.env here
from ax3l.shared.ports import free_port as free_port  # re-exported: tests take ports here
from ax3l.shared.waiting import wait_until as wait_until  # re-exported: tests wait here
from ax3l.testing.databases import (
    TestDatabases,
    create_snakelab_tables,
    find_env_file,
    scratch_databases,
)


@pytest.fixture(scope="session")
def db_env() -> dict[str, str]:
    """The private MariaDB's connection settings (``.run/db.env``)."""
    path = find_env_file()
    if path is None:
        pytest.fail("no .run/db.env: start the test database with `scripts/mariadb.sh start`")
    return read_env_file(path)


@pytest.fixture
def databases(db_env: dict[str, str]) -> Iterator[TestDatabases]:
    """A fresh ``ax3l`` database (schema created) and an empty ``snakelab`` one, dropped after."""
    with scratch_databases(db_env) as dbs:
        yield dbs


@pytest.fixture
def snakelab_tables(databases: TestDatabases) -> TestDatabases:
    """``databases`` with SnakeLab's tables created."""
    create_snakelab_tables(databases)
    return databases


@pytest.fixture
def stack(databases: TestDatabases, tmp_path: Path) -> Iterator[Any]:
    """A not yet started ``ax3l.testing.stack.Stack`` on this test's databases (call
    ``stack.start()``; ``use_schema`` first if needed); everything killed after."""
    from ax3l.testing.stack import Stack  # processes and schemas: only for suites that ask

    created = Stack(databases, tmp_path)
    try:
        yield created
    finally:
        created.close()


@pytest.fixture
def test_output_dir(request: pytest.FixtureRequest) -> Path:
    """A folder under ``test-output/`` for screenshots and artefacts of this test."""
    root = Path(os.environ.get("AX3L_TEST_OUTPUT", Path(request.config.rootpath) / "test-output"))
    folder: Path = root / request.node.name
    folder.mkdir(parents=True, exist_ok=True)
    return folder
