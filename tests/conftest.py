"""Cross-service tests. Two tiers are not part of the default suite: ``llm/`` needs a real
llama-server (``make test-llm`` sets AX3L_TEST_LLM_URL) and ``chaos/`` runs for minutes
(``make test-chaos`` sets AX3L_TEST_CHAOS)."""

from __future__ import annotations

import os

collect_ignore: list[str] = []
if not os.environ.get("AX3L_TEST_LLM_URL"):
    collect_ignore.append("llm")
if not os.environ.get("AX3L_TEST_CHAOS"):
    collect_ignore.append("chaos")
