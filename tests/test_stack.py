"""`make run`'s stack script brings the whole experiment up as real processes and stops it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from ax3l.testing.plugin import free_port, wait_until

REPO = Path(__file__).resolve().parent.parent


def _get_json(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return json.loads(reply.read())
    except OSError:
        return None


def _count_events(databases, name: str) -> int:
    return int(databases.query("SELECT COUNT(*) FROM events WHERE name = %s", (name,))[0][0])


def test_stack_starts_runs_the_experiment_and_stops(databases, tmp_path):
    """stack.py start brings up every service, the loop makes progress, stop ends them all."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "db.env").write_text(
        "\n".join(f"{key}={value}" for key, value in databases.env().items()) + "\n"
    )
    ports = {name: free_port() for name in ("reports", "orchestrator", "toolbroker", "snakelab")}
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AX3L_", "SNAKELAB_", "DB_"))},
        "AX3L_RUN_DIR": str(run_dir),
        "SNAKELAB_PORT": str(ports["snakelab"]),
        "SNAKELAB_TRAINER": "surrogate",
        "SNAKELAB_SURROGATE_SECONDS": "0",
        "AX3L_ZMQ_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
        "AX3L_REPORTS_PORT": str(ports["reports"]),
        "AX3L_ORCHESTRATOR_PORT": str(ports["orchestrator"]),
        "AX3L_TOOLBROKER_PORT": str(ports["toolbroker"]),
        "AX3L_POLL_INTERVAL": "0.1",
        "AX3L_PROPOSER": "random",
    }
    script = [sys.executable, str(REPO / "scripts" / "stack.py")]
    try:
        started = subprocess.run(
            [*script, "start"], env=env, capture_output=True, text=True, timeout=180
        )
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"http://127.0.0.1:{ports['reports']}/" in started.stdout
        again = subprocess.run(
            [*script, "start"], env=env, capture_output=True, text=True, timeout=60
        )
        assert again.returncode == 0 and "already running" in again.stdout
        wait_until(
            lambda: _count_events(databases, "configuration_compared") >= 3,
            timeout=120,
            interval=0.5,
            what="three compared steps",
        )
        status = _get_json(f"http://127.0.0.1:{ports['orchestrator']}/api/status")
        assert status is not None and status.get("proposer") == "random"
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['reports']}/", timeout=5) as page:
            assert page.status == 200
        assert _count_events(databases, "golden_config_created") >= 1
    finally:
        stopped = subprocess.run(
            [*script, "stop"], env=env, capture_output=True, text=True, timeout=120
        )
    assert stopped.returncode == 0, stopped.stderr
    assert not list((run_dir / "stack").glob("*.pid"))
    for port in ports.values():
        assert _get_json(f"http://127.0.0.1:{port}/health") is None
