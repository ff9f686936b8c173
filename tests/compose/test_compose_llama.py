"""The demo deployment with the local llama-server container (``compose.llama.yaml``) serving
the tiny real model that ``scripts/llama-server.sh`` assembles: the orchestrator converses
with it over the compose network, and the loop advances however badly the model behaves.
Skipped until that script has built its binary and model (``make llm-start`` does)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compose_harness import REPO, Compose, Timings, check_no_duplicates, make_compose, step_count

from ax3l.testing.plugin import wait_until

pytestmark = pytest.mark.timeout(2700)
FILES = ["compose.yaml", "compose.demo.yaml", "compose.llama.yaml"]
MODEL = Path(os.environ.get("AX3L_CACHE_DIR", Path.home() / ".cache" / "ax3l")) / "models"
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"


@pytest.fixture(scope="module")
def llama(base_images: None, output_dir: Path, timings: Timings) -> Iterator[Compose]:
    """The demo stack plus the llama-server container, up once for the module."""
    cached = subprocess.run([str(REPO / "scripts" / "llama-server.sh"), "cached"])
    if cached.returncode != 0:
        pytest.skip("no cached llama-server and model yet (scripts/llama-server.sh build)")
    compose = make_compose(
        "ax3l-compose-llama",
        FILES,
        output_dir,
        AX3L_LLAMA_MODEL=MODEL_FILE,
        AX3L_MODELS_DIR=str(MODEL),
        AX3L_LLAMA_CTX="4096",
        # Short replies and a fallback after one failed conversation: on a loaded machine the
        # tiny model has been seen writing half a token a second.
        AX3L_LLM_MAX_TOKENS="32",
        AX3L_LLM_FALLBACK_AFTER="1",
        SNAKELAB_SURROGATE_SECONDS="2",
    )
    compose.run("down", "-v", "--remove-orphans")
    compose.run("build")
    with compose.up(timings, "llama: up to all healthy", healthy_within=400):
        yield compose


def test_the_orchestrator_converses_with_the_model_container_and_the_loop_advances(
    llama: Compose, timings: Timings
):
    """Model conversations reach llama-server through the compose network (replies are
    logged), and steps complete: the model's proposals or, after its failures, the fallback's."""
    began = time.monotonic()
    wait_until(
        lambda: llama.scalar("SELECT COUNT(*) FROM ax3l.events WHERE name = 'reply_received'"),
        timeout=900,
        interval=1,
        what="a reply from the model",
    )
    llm_conversations = llama.scalar(
        "SELECT COUNT(*) FROM ax3l.events e JOIN ax3l.event_messages m USING (event_id)"
        " WHERE e.name = 'conversation_started' AND JSON_VALUE(m.content, '$.proposer') = 'llm'"
    )
    assert llm_conversations >= 1
    wait_until(lambda: step_count(llama) >= 1, timeout=1200, interval=1, what="a step")
    timings["llama: up to the first step"] = time.monotonic() - began
    failures = llama.sql(
        "SELECT JSON_VALUE(m.content, '$.kind'), COUNT(*) FROM ax3l.events e"
        " JOIN ax3l.event_messages m USING (event_id) WHERE e.name = 'llm_request_failed'"
        " GROUP BY 1"
    )
    # A connection error would mean the container network, not the model, failed.
    assert "connection_error" not in {kind for kind, _ in failures}, failures
    check_no_duplicates(llama)
