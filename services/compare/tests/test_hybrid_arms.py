"""Two hybrid arms of one comparison give the LLM the same steps (AX3L_LLM_SHARE's draw is
seeded by the repeat's seed), whichever classical proposer they pair it with."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

from ax3l.orchestrator.proposers.hybrid import llm_decides
from ax3l.shared.ports import free_port
from ax3l.shared.waiting import wait_until
from ax3l.testing.databases import compare_environment, run_module
from ax3l.testing.scripted_llm import random_call_ranges

SHARE = 0.5
BUDGET = 9


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_llm_plus_tpe_and_llm_plus_model_give_the_llm_the_same_steps(databases, db_env, tmp_path):
    """Against a scripted model that always calls the tool with a legal value, both hybrids'
    repeats on one seed let the LLM decide exactly the steps the seeded draw names."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"then": {"random_call": random_call_ranges()}}))
    port = free_port()
    command = [sys.executable, "-m", "ax3l.testing.scripted_llm", "--port", str(port)]
    model = subprocess.Popen([*command, "--script", str(script)], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(url), 20, "the scripted model server")
        env = {**compare_environment(databases, db_env), "AX3L_LLM_SHARE": str(SHARE)}
        args = ["--proposers", "llm+tpe,llm+model", "--no-control", "--repeats", "1"]
        args += ["--budget", str(BUDGET), "--retest", "0", "--url", url]
        completed = run_module("ax3l.compare", *args, env=env, timeout=600)
    finally:
        model.terminate()
        model.wait(10)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    rows = databases.query(
        "SELECT proposer, seed, accepted_proposals, content FROM comparison_repeats",
        user="ax3l",
    )
    steps = {}
    for proposer, seed, accepted, content in rows:
        counts = json.loads(content)
        steps[proposer] = counts["llm_steps"]
        expected = [n for n in range(accepted) if llm_decides(n, SHARE, seed)]
        assert counts["llm_steps"] == expected, proposer
    assert steps["llm+tpe"] == steps["llm+model"] and steps["llm+tpe"]
    assert "wasted turns by reason" not in completed.stdout  # the scripted model wastes none
