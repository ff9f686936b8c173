"""Fixtures of the real-model tier: the llama-server that ``make test-llm`` started (the
``stack`` fixture comes from the test plugin)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def llm_url() -> str:
    """The real llama-server's base URL (AX3L_TEST_LLM_URL)."""
    return os.environ["AX3L_TEST_LLM_URL"]
