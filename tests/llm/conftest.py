"""Fixtures of the real-model tier: a stack and the llama-server that ``make test-llm`` started."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ax3l.testing.plugin import TestDatabases
from ax3l.testing.stack import Stack


@pytest.fixture
def llm_url() -> str:
    """The real llama-server's base URL (AX3L_TEST_LLM_URL)."""
    return os.environ["AX3L_TEST_LLM_URL"]


@pytest.fixture
def stack(databases: TestDatabases, tmp_path: Path) -> Iterator[Stack]:
    """A not yet started stack."""
    created = Stack(databases, tmp_path)
    try:
        yield created
    finally:
        created.close()
