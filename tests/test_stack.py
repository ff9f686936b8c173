"""`make run`'s stack script brings the whole experiment up as real processes and stops it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ax3l.testing.plugin import free_port, wait_until
from ax3l.testing.snakelab_process import SnakeLabProcess
from snakelab.healthcheck import ping

REPO = Path(__file__).resolve().parent.parent


def _get_json(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return json.loads(reply.read())
    except OSError:
        return None


def _count_events(databases, name: str) -> int:
    return int(databases.query("SELECT COUNT(*) FROM events WHERE name = %s", (name,))[0][0])


def _stack_env(databases, tmp_path: Path, ports: dict[str, int]) -> dict[str, str]:
    """What a user's shell gives ``stack.py``: the private MariaDB's db.env in a run dir of its
    own, free ports, the surrogate trainer and the random proposer."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "db.env").write_text(
        "\n".join(f"{key}={value}" for key, value in databases.env().items()) + "\n"
    )
    return {
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


def test_stack_starts_runs_the_experiment_and_stops(databases, tmp_path):
    """stack.py start brings up every service, the loop makes progress, stop ends them all."""
    ports = {name: free_port() for name in ("reports", "orchestrator", "toolbroker", "snakelab")}
    env = _stack_env(databases, tmp_path, ports)
    run_dir = Path(env["AX3L_RUN_DIR"])
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


@pytest.mark.long  # a whole stack started and stopped once more (make test-long)
def test_with_a_snakelab_of_its_own_the_stack_starts_no_reference_snakelab(databases, tmp_path):
    """With ``AX3L_SNAKELAB_ENDPOINT`` set (the user's own SnakeLab, here a reference SnakeLab
    started apart), stack.py starts the three Ax3l services and no SnakeLab: the loop's runs
    are the user's SnakeLab's, nothing listens on the reference SnakeLab's port, and stop
    leaves the user's SnakeLab running."""
    ports = {name: free_port() for name in ("reports", "orchestrator", "toolbroker", "snakelab")}
    env = _stack_env(databases, tmp_path, ports)
    theirs = SnakeLabProcess(databases.env()).start()
    env["AX3L_SNAKELAB_ENDPOINT"] = theirs.endpoint
    script = [sys.executable, str(REPO / "scripts" / "stack.py")]
    try:
        started = subprocess.run(
            [*script, "start"], env=env, capture_output=True, text=True, timeout=180
        )
        assert started.returncode == 0, started.stdout + started.stderr
        wait_until(
            lambda: _count_events(databases, "configuration_compared") >= 2,
            timeout=120,
            interval=0.5,
            what="two compared steps",
        )
        status = subprocess.run(
            [*script, "status"], env=env, capture_output=True, text=True, timeout=60
        )
        listed = [line.split()[0] for line in status.stdout.splitlines() if line.strip()]
        assert "snakelab" not in listed, status.stdout
        assert {"toolbroker", "orchestrator", "reports"} <= set(listed), status.stdout
        pids = {p.stem for p in (Path(env["AX3L_RUN_DIR"]) / "stack").glob("*.pid")}
        assert "snakelab" not in pids, pids
        assert not ping(f"tcp://127.0.0.1:{ports['snakelab']}", timeout=0.5)
        runs = databases.query("SELECT COUNT(*) FROM simulation_runs", user="snakelab")[0][0]
        assert runs >= 3  # seeding and two proposals, on their SnakeLab
    finally:
        stopped = subprocess.run(
            [*script, "stop"], env=env, capture_output=True, text=True, timeout=120
        )
        try:
            assert stopped.returncode == 0, stopped.stderr
            assert ping(theirs.endpoint)  # theirs, not the stack's to stop
        finally:
            theirs.close()
