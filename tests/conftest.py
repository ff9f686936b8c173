"""Cross-service tests. Three tiers are not part of the default suite: ``llm/`` needs a real
llama-server (``make test-llm`` sets AX3L_TEST_LLM_URL), ``compose/`` needs a Docker engine
and its images (``make test-compose`` sets AX3L_TEST_COMPOSE), and the chaos test runs for
minutes (marked ``chaos``, deselected by pyproject's addopts; ``make test-chaos`` selects it)."""

from __future__ import annotations

import os

collect_ignore: list[str] = []
if not os.environ.get("AX3L_TEST_LLM_URL"):
    collect_ignore.append("llm")
if not os.environ.get("AX3L_TEST_COMPOSE"):
    collect_ignore.append("compose")
