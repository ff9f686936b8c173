"""``ax3l-compare --ray`` on a real Ray cluster of three local nodes (``conftest.py``): repeats
spread over the nodes, a node lost mid-repeat, the same results as a local run, SIGTERM, and a
node of another Ax3l version refused.

Every comparison is ``python -m ax3l.compare`` as a process of its own (the driver), on 0 s
surrogate runs unless a test needs a repeat to last, with its results in the test's Ax3l
database and its throwaway databases on the private MariaDB.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from ax3l.compare.executor import RepeatJob
from ax3l.compare.ray_executor import RayExecutor, ResourceRequest
from ax3l.compare.repeat import RepeatPlan
from ax3l.compare.settings import load_settings
from ax3l.compare.throwaway import pairs_left
from ax3l.compare.version import VersionMismatch, ax3l_version
from ax3l.shared.config_schema import load_schema
from ax3l.shared.waiting import wait_until
from ax3l.testing.databases import compare_environment
from snakelab.trainers.surrogate import predict_high_score

COMPARISON_TIMEOUT = 600


def _env(databases, db_env, cluster=None) -> dict[str, str]:
    """The driver's environment (``compare_environment``: results into the test's Ax3l
    database, the admin login), Ray on 127.0.0.1, and RAY_ADDRESS (``--ray auto`` finds the
    cluster through it)."""
    env = compare_environment(databases, db_env)
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    if cluster is not None:
        env["RAY_ADDRESS"] = cluster.address
    return env


class Driver:
    """``python -m ax3l.compare`` as a process of its own, its output in a file."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.output = Path(tempfile.mkstemp(prefix="ax3l-ray-driver-", suffix=".log")[1])
        with self.output.open("w") as handle:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ax3l.compare", *argv],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def finish(self, timeout: float = COMPARISON_TIMEOUT) -> tuple[int, str]:
        """Its exit code and output; killed (and the output shown) after ``timeout``."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"ax3l-compare did not end within {timeout:g} s:\n{self.text()}")
        return code, self.text()

    def ended(self) -> str | None:
        """``wait_until``'s give_up: the driver ended early (its output is the message)."""
        if self.process.poll() is None:
            return None
        return f"ax3l-compare ended with {self.process.returncode}:\n{self.text()}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _rows(databases, comparison_id: int) -> tuple[list[dict[str, Any]], list[tuple]]:
    """The comparison's repeats (with their content) and re-tests, as stored."""
    conn = databases.connect("ax3l", databases.ax3l_db)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT proposer, repeat_index, seed, state, runs, best_so_far, content"
                " FROM comparison_repeats WHERE comparison_id = %s"
                " ORDER BY proposer, repeat_index",
                (comparison_id,),
            )
            repeats = [
                {
                    "proposer": p,
                    "index": i,
                    "seed": seed,
                    "state": state,
                    "runs": runs,
                    "curve": json.loads(curve),
                    **json.loads(text),
                }
                for p, i, seed, state, runs, curve, text in cur.fetchall()
            ]
            cur.execute(
                "SELECT proposer, repeat_index, at_runs, seed, score FROM comparison_retests"
                " WHERE comparison_id = %s ORDER BY proposer, repeat_index, at_runs, seed",
                (comparison_id,),
            )
            retests = [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()
    return repeats, retests


def _comparisons(databases) -> list[tuple[int, str, dict[str, Any]]]:
    conn = databases.connect("ax3l", databases.ax3l_db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT comparison_id, state, content FROM comparisons ORDER BY 1")
            return [(int(i), str(s), json.loads(c)) for i, s, c in cur.fetchall()]
    finally:
        conn.close()


def _settings(databases, db_env):
    return load_settings(_env(databases, db_env))


def _processes_of(token: str) -> list[int]:
    """Processes (a repeat's services) whose environment names the comparison's databases."""
    needle = f"_DB_NAME=snakelab_{token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _run_counts(databases, prefix: str) -> dict[str, int]:
    """SnakeLab's run count in each database pair named with ``prefix`` (0 before its
    tables exist)."""
    conn = databases.connect("admin")
    counts = {}
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            names = [r[0] for r in cur.fetchall() if r[0].startswith(f"snakelab_{prefix}")]
            for name in names:
                try:
                    cur.execute(f"SELECT COUNT(*) FROM `{name}`.simulation_runs")
                    counts[name] = int(cur.fetchone()[0])
                except Exception:
                    counts[name] = 0
    finally:
        conn.close()
    return counts


def _token(databases) -> str:
    """The running comparison's database token (its content's ``databases``)."""
    found: list[str] = []

    def recorded() -> bool:
        found[:] = [c["databases"] for _, _, c in _comparisons(databases)]
        return bool(found)

    wait_until(recorded, 120, interval=0.2)
    return found[-1]


def _recommended(pick: dict[str, Any]) -> tuple:
    """A recommendation without its run's id (each comparison's own runs)."""
    return pick["at_runs"], pick["config"], pick["expected_score"]


def test_repeats_spread_over_the_nodes_and_equal_a_local_comparison(ray_cluster, databases, db_env):
    """The control arm and tpe x 3 repeats x 3 runs, 2 held-out seeds, on the cluster
    (``--ray auto``, one ``snakelab`` unit per repeat) and then locally with the same seeds.
    On Ray every repeat records the node it ran on: both workers ran repeats, never the head.
    The seeds decide everything, so the two are equal: every repeat's runs, curve,
    recommendations and re-test scores (tpe's draws are seeded per repeat by
    ``AX3L_PROPOSER_SEED``), and every re-test score is the surrogate's score of its
    recommendation."""
    argv = ["--proposers", "tpe", "--repeats", "3", "--budget", "3", "--retest", "2"]
    env = _env(databases, db_env, ray_cluster)
    code, output = Driver([*argv, "--ray", "auto", "--ray-resource", "snakelab=1"], env).finish()
    assert code == 0, output
    assert "placement (Ray nodes):" in output, output
    code, local_output = Driver([*argv, "--parallel", "2"], env).finish()
    assert code == 0, local_output
    (ray_id, ray_state, ray_content), (local_id, local_state, local_content) = _comparisons(
        databases
    )
    assert (ray_state, local_state) == ("finished", "finished")
    assert ray_content["executor"]["kind"] == "ray" and local_content["executor"]["kind"] == "local"
    assert ray_content["version"] == local_content["version"] == ax3l_version()
    on_ray, ray_retests = _rows(databases, ray_id)
    local, local_retests = _rows(databases, local_id)

    workers = {node.node_id for node in ray_cluster.worker_nodes}
    used = {row["placement"]["node_id"] for row in on_ray}
    assert len(used) >= 2 and used <= workers, (used, workers)
    assert all(row["placement"]["node_id"] is None for row in local)

    def decided(row: dict[str, Any]) -> tuple:
        return (row["proposer"], row["index"], row["seed"], row["state"], row["runs"],
                row["scores"][0])  # fmt: skip

    assert [decided(r) for r in on_ray] == [decided(r) for r in local]
    assert len(on_ray) == 6 and {r["proposer"] for r in on_ray} == {"default", "tpe"}
    default = load_schema().default_config()
    for row in on_ray:
        assert row["scores"][0] == predict_high_score({**default, "seed": row["seed"]})
    outcome = [
        (r["proposer"], r["scores"], r["curve"], [_recommended(p) for p in r["recommendations"]])
        for rows in (on_ray, local)
        for r in rows
    ]
    assert outcome[:6] == outcome[6:]
    assert ray_retests == local_retests
    held_out = ray_content["retest"]["seeds"]  # every repeat's own held-out seeds
    assert held_out == local_content["retest"]["seeds"] and len(held_out) == 3 * 2
    for rows, retests in ((on_ray, ray_retests), (local, local_retests)):
        assert len(retests) == len(rows) * 2  # each of its 2 seeds once per repeat
        per_repeat: dict[int, set[int]] = {}
        for _, index, _, seed, _ in retests:
            per_repeat.setdefault(index, set()).add(seed)
        assert sorted(s for seeds in per_repeat.values() for s in seeds) == held_out
        picks = {(r["proposer"], r["index"]): r["recommendations"][-1]["config"] for r in rows}
        for proposer, index, _, seed, score in retests:
            assert score == predict_high_score({**picks[proposer, index], "seed": seed})
    for content in (ray_content, local_content):
        assert not pairs_left(_settings(databases, db_env), content["databases"])


def test_a_node_lost_mid_repeat_has_its_repeat_run_again_elsewhere_once(
    ray_cluster, node_args, databases, db_env
):
    """A third worker, the only one with a ``victim`` unit, runs the comparison's one repeat
    (tpe, 4 runs of 1.5 s); once its SnakeLab holds a run, the node is removed (its processes
    SIGKILLed: a machine lost) and a fourth node with the unit joins. Ray runs the task again
    there: the repeat starts over on a fresh database pair, the lost attempt's pair is
    dropped, and it is stored once, complete, with the new node as its placement; nothing of
    the lost attempt runs on."""
    victim = ray_cluster.add_node(**node_args(num_cpus=1, resources={"victim": 1}))
    argv = ["--proposers", "tpe", "--no-control", "--repeats", "1", "--budget", "4"]
    argv += ["--retest", "1", "--surrogate-seconds", "1.5", "--seed", "2024"]
    argv += ["--ray", ray_cluster.address, "--ray-resource", "victim=1"]
    driver = Driver(argv, _env(databases, db_env))
    rescue = None
    try:
        token = _token(databases)
        lost: dict[str, int] = {}

        def mid_repeat() -> bool:
            lost.update(_run_counts(databases, token))
            return any(count >= 1 for count in lost.values())

        wait_until(mid_repeat, 180, interval=0.2, give_up=driver.ended)
        ray_cluster.remove_node(victim, allow_graceful=False)
        rescue = ray_cluster.add_node(**node_args(num_cpus=1, resources={"victim": 1}))
        code, output = driver.finish()
    finally:
        driver.kill()
    assert code == 0, output
    [(comparison_id, state, _)] = _comparisons(databases)
    assert state == "finished"
    [row], retests = _rows(databases, comparison_id)
    assert (row["proposer"], row["index"], row["state"], row["runs"]) == ("tpe", 0, "finished", 4)
    assert len(row["scores"]) == 4 and len(retests) == 1
    assert row["placement"]["node_id"] == rescue.node_id != victim.node_id
    # The lost attempt's pair is gone (dropped by the new attempt, or by the lost one itself
    # had its worker had the time), and no pair of the comparison is left.
    assert lost and not pairs_left(_settings(databases, db_env), token)
    assert row["placement"]["dropped_earlier"] in (0, 1)
    wait_until(lambda: not _processes_of(token), 30, interval=0.5)


def test_sigterm_cancels_the_tasks_and_drops_their_databases(
    ray_cluster, databases, db_env, tmp_path
):
    """SIGTERM to a comparison whose repeats run on both workers (2 s runs): it exits 130,
    every task is cancelled (each stops its services and drops its pair), no pair of the
    comparison is left and no service of it runs on."""
    argv = ["--proposers", "tpe", "--no-control", "--repeats", "3", "--budget", "20"]
    argv += ["--retest", "0", "--surrogate-seconds", "2", "--logs", str(tmp_path)]
    argv += ["--ray", ray_cluster.address, "--ray-resource", "snakelab=1"]
    driver = Driver(argv, _env(databases, db_env))
    try:
        token = _token(databases)

        def both_running() -> bool:
            return sum(c >= 1 for c in _run_counts(databases, token).values()) >= 2

        wait_until(both_running, 180, interval=0.2, give_up=driver.ended)
        began = time.monotonic()
        driver.process.send_signal(signal.SIGTERM)
        code, output = driver.finish(120)
        stopped = time.monotonic() - began
    finally:
        driver.kill()
    assert code == 130, output
    assert stopped < 90, stopped
    assert not pairs_left(_settings(databases, db_env), token)
    wait_until(lambda: not _processes_of(token), 30, interval=0.5)
    [(_, state, _)] = _comparisons(databases)
    assert state == "failed"


def test_a_node_of_another_version_refuses_the_repeat(ray_cluster, databases, db_env, tmp_path):
    """A task whose driver runs another Ax3l version stops before anything runs: the error
    names both versions, and no database pair was made."""
    job = RepeatJob(
        _env(databases, db_env),
        None,
        0.0,
        60.0,
        "cmpversiontest",
        "0.0.0-driver",
        tmp_path,
    )
    executor = RayExecutor(ray_cluster.address, ResourceRequest("snakelab", 1))
    executor.prepare()
    try:
        executor.submit([RepeatPlan("tpe", 0, 1970, 2)], job)
        with pytest.raises(VersionMismatch) as raised:
            list(executor.completed())
    finally:
        executor.close()
    message = str(raised.value)
    assert "0.0.0-driver" in message and f"Ax3l {ax3l_version()}" in message, message
    assert "Ray node" in message
    assert not pairs_left(_settings(databases, db_env), "cmpversiontest")


def test_the_resource_a_task_asks_for():
    """--ray-resource: CPU and GPU are Ray's own, any other name a custom resource alone (no
    CPU asked); a missing or non-positive amount is refused."""
    assert ResourceRequest.parse("CPU=1").options() == {"num_cpus": 1.0}
    assert ResourceRequest.parse("GPU=0.5").options() == {"num_cpus": 0, "num_gpus": 0.5}
    assert ResourceRequest.parse("snakelab").options() == {
        "num_cpus": 0,
        "resources": {"snakelab": 1.0},
    }
    for text in ("=1", "snakelab=0", "snakelab=x", "CPU=-1"):
        with pytest.raises(ValueError, match="NAME=AMOUNT"):
            ResourceRequest.parse(text)


def test_no_cluster_at_the_address_is_refused_at_once(databases, db_env):
    """--ray at an address where nothing listens: exit 2 within seconds (Ray alone would try
    for minutes), nothing recorded."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    argv = ["--proposers", "tpe", "--repeats", "1", "--budget", "2", "--ray", f"127.0.0.1:{port}"]
    code, output = Driver(argv, _env(databases, db_env)).finish(120)
    assert code == 2 and f"no Ray cluster at 127.0.0.1:{port}" in output, output
    assert _comparisons(databases) == []
