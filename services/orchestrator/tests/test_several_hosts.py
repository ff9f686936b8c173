"""Two reference SnakeLab hosts sharing one database (``AX3L_SNAKELAB_ENDPOINTS``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from orchestrator_stack import compared

from ax3l.testing.confirmation_case import BETTER, CONFIRM, RANDOM_HIDDEN, SCHEMA, submit
from ax3l.testing.snakelab_process import SnakeLabProcess
from ax3l.testing.stack import Stack, check_history, tiny_schema

pytestmark = pytest.mark.long  # two hosts with runs of seconds: about a minute (make test-long)


def run_rows(stack: Stack) -> dict[str, dict[str, Any]]:
    """Each run's host and training interval, from SnakeLab's shared table."""
    rows = stack.databases.query(
        "SELECT run_id, host, status, started_at, completed_at FROM simulation_runs",
        user="snakelab",
    )
    return {
        str(run_id): {"host": host, "status": status, "started": start, "ended": end}
        for run_id, host, status, start, end in rows
    }


def hosts(stack: Stack) -> list[SnakeLabProcess]:
    """The stack's SnakeLab hosts, h0 first."""
    assert stack.snakelab is not None
    return [stack.snakelab, *stack.extra_hosts]


def overlap(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether two runs trained at the same time."""
    begin: datetime = max(first["started"], second["started"])
    end: datetime = min(first["ended"], second["ended"])
    return begin < end


def test_a_confirmations_runs_train_side_by_side_on_two_hosts(stack: Stack) -> None:
    """Under confirm with two hosts, the runs a confirmation submits together go to both
    hosts and train at the same time (seeding's and the candidate's), each recorded with its
    host; the history keeps every invariant."""
    stack.use_schema(SCHEMA)
    stack.start(surrogate_seconds=3, hosts=2)
    model = stack.start_model({"replies": [submit(BETTER)], "then": RANDOM_HIDDEN})
    proc = stack.orchestrator("llm", url=model.url, env=CONFIRM)
    stack.wait_for(lambda: stack.count("golden_config_created") >= 2, 120, "the promotion", proc)
    status = stack.status()
    proc.stop()

    rows = run_rows(stack)
    seeding, promoted = stack.events("golden_config_created")[:2]
    (decided,) = stack.events("promotion_confirmation_decided")
    for pair in (seeding.get("confirmation_runs")[1:], decided.get("candidate_runs")[1:]):
        first, second = (rows[run_id] for run_id in pair)
        assert {first["host"], second["host"]} == {"h0", "h1"}
        assert overlap(first, second), (first, second)
    recorded = {
        e.process_id: e.get("host")
        for e in stack.events("simulation_submitted")
        if e.get("purpose") == "confirmation"
    }
    endpoints = {f"h{k}": host.endpoint for k, host in enumerate(hosts(stack))}
    assert recorded and all(recorded[r] == endpoints[rows[str(r)]["host"]] for r in recorded)
    assert set(status["snakelab_hosts"]) == set(endpoints.values())
    assert promoted.get("kind") == "promotion"
    check_history(stack)


def test_a_rotations_baseline_trains_beside_its_confirmation_runs(stack: Stack) -> None:
    """Under confirm with two hosts, a seed rotation submits its baseline and the baseline's
    runs on the new seed's confirmation seeds together (one of those seeds may already hold the
    configuration's run from seeding's confirmation, reused): the baseline trains at the same
    time as one of them, on the other host, and the new golden's mean is over all three."""
    stack.use_schema(tiny_schema())
    stack.start(surrogate_seconds=3, hosts=2)
    env = {"AX3L_PROMOTION": "confirm", "AX3L_SEED_STAGNANT_ROUNDS": "1"}
    proc = stack.orchestrator("random", env=env)
    stack.wait_for(
        lambda: any(
            g.get("kind") == "seed_rotation" for g in stack.events("golden_config_created")
        ),
        150,
        "a seed rotation",
        proc,
    )
    proc.stop()

    rows = run_rows(stack)
    rotated = next(
        g for g in stack.events("golden_config_created") if g.get("kind") == "seed_rotation"
    )
    baseline, *confirming = rotated.get("confirmation_runs")
    assert baseline == rotated.get("run_id") and len(confirming) == 2
    beside = [r for r in confirming if overlap(rows[baseline], rows[r])]
    assert beside, {r: rows[r] for r in (baseline, *confirming)}
    assert all(rows[r]["host"] != rows[baseline]["host"] for r in beside)
    (started,) = stack.events("seed_rotation_started")
    parents = {
        e.process_id: e.parent
        for e in stack.events("simulation_submitted")
        if e.process_id in (baseline, *confirming)
    }
    # Submitted by the rotation, or reused from an earlier confirmation on the same seed.
    assert parents[baseline] == started.event_id, parents
    assert all((parents[r] or 0) <= started.event_id for r in confirming), parents
    check_history(stack)


def test_a_host_killed_mid_run_fails_only_its_own_run(stack: Stack) -> None:
    """A proposal's run trains on one host, the other trains nothing; that host is killed and
    restarted (as a supervisor would): its run is failed by the restart and the step treats it
    like any failed run, the loop goes on over both hosts, nothing is run twice, and the
    host's stop and return are events."""
    stack.use_schema(SCHEMA)
    stack.start(surrogate_seconds=8, hosts=2)
    model = stack.start_model({"replies": [submit(BETTER)], "then": RANDOM_HIDDEN})
    env = {"AX3L_SEED_STAGNANT_ROUNDS": "100", "AX3L_SNAKELAB_TIMEOUT": "1"}
    proc = stack.orchestrator("llm", url=model.url, env=env)
    stack.wait_for(lambda: stack.count("proposal_accepted") >= 1, 120, "a proposal", proc)
    (accepted,) = stack.events("proposal_accepted")
    run_id = str(accepted.process_id)
    stack.wait_for(lambda: run_rows(stack)[run_id]["status"] == "running", 60, "its run", proc)
    host = run_rows(stack)[run_id]["host"]
    victim = hosts(stack)[int(host[1:])]
    victim.kill()
    stack.wait_for(lambda: stack.count("snakelab_host_down") >= 1, 60, "the host missed", proc)
    victim.close()
    restarted = SnakeLabProcess(
        stack.databases.env(),
        seconds=0,
        port=victim.port,
        events_port=victim.events_port,
        extra_env={
            k: v
            for k, v in victim.env.items()
            if k.startswith("SNAKELAB_") and k != "SNAKELAB_SURROGATE_SECONDS"
        },
    ).start()
    try:
        stack.wait_for(compared(stack), 120, "the step's end", proc)
        proc.stop()
    finally:
        restarted.close()
    rows = run_rows(stack)
    assert rows[run_id]["status"] == "failed"
    others = [r for r, row in rows.items() if r != run_id and row["status"] != "completed"]
    assert not others, {r: rows[r] for r in others}
    assert stack.count("snakelab_host_up") >= 1
    check_history(stack)
