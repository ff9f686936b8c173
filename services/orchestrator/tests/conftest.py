"""Fixtures for the orchestrator's end-to-end tests (the helpers live in
``ax3l.testing.stack`` so the benchmark can use them too)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ax3l.testing.plugin import TestDatabases
from ax3l.testing.stack import Stack


@pytest.fixture
def stack(databases: TestDatabases, tmp_path: Path) -> Iterator[Stack]:
    """A not yet started stack (call ``stack.start()``; ``use_schema`` first if needed)."""
    created = Stack(databases, tmp_path)
    try:
        yield created
    finally:
        created.close()
