"""At startup the loop waits out a run someone else left on SnakeLab, but not its own run."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from orchestrator_stack import status_or_none

from ax3l.shared.config_schema import load_schema
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.testing.stack import Stack

IDLE_WAIT = "waiting for SnakeLab to become idle"
# Long enough to pause a run before it ends, short enough to keep the suite fast.
RUN_SECONDS = 2.0


async def pause_once_running(client: SnakeLabClient, run_id: str) -> None:
    """Pause ``run_id`` as soon as it runs (SnakeLab only pauses a running run)."""
    deadline = time.monotonic() + 20
    while (await client.status(run_id)).state != "running":
        assert time.monotonic() < deadline, f"run {run_id} never started"
        await asyncio.sleep(0.02)
    assert (await client.pause(run_id)).state == "paused"


def run_times(stack: Stack) -> list[dict[str, Any]]:
    """SnakeLab's runs with their timestamps, in submission order."""
    columns = ("run_id", "status", "created_at", "completed_at")
    sql = f"SELECT {', '.join(columns)} FROM simulation_runs ORDER BY id"
    rows = stack.databases.query(sql, database=stack.databases.snakelab_db)
    return [dict(zip(columns, row, strict=True)) for row in rows]


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
async def test_a_foreign_active_run_is_waited_out_before_the_first_submission(
    stack: Stack,
) -> None:
    """A run Ax3l did not submit keeps a restarted loop from submitting until SnakeLab is idle.

    The experiment exists first: on a first start a foreign run is refused instead (the spec's
    first start needs an empty SnakeLab; ``ax3l.shared.db.adopt``).
    """
    stack.start(surrogate_seconds=RUN_SECONDS)
    assert stack.snakelab is not None
    client = SnakeLabClient(stack.snakelab.endpoint)
    proc = stack.orchestrator("random")
    stack.wait_for(lambda: stack.count("golden_config_created"), 60, "the first golden", proc)
    proc.stop()
    deadline = time.monotonic() + 60
    while await client.active() is not None:  # a turn's run the stop left behind
        assert time.monotonic() < deadline, "SnakeLab never became idle"
        await asyncio.sleep(0.05)
    schema = load_schema()
    # Not the defaults: seeding would reuse a run of those as its own.
    foreign_config = schema.validate(schema.with_values(schema.default_config(), {"seed": 4242}))
    foreign = (await client.submit(foreign_config)).run_id
    await pause_once_running(client, foreign)
    runs_before = [r["run_id"] for r in run_times(stack)]
    submitted = stack.count("simulation_submitted")

    proc = stack.orchestrator("random")
    status = stack.wait_for(
        lambda: (s := status_or_none(stack)) and IDLE_WAIT in (s["last_error"] or "") and s,
        60,
        "the idle wait in the status",
        proc,
    )
    assert foreign in status["last_error"] and status["phase"] == "starting"
    assert runs_before[-1] == foreign and [r["run_id"] for r in run_times(stack)] == runs_before
    assert stack.count("simulation_submitted") == submitted, "nothing submitted while busy"

    await client.resume(foreign)
    stack.wait_for(
        lambda: stack.count("simulation_submitted") > submitted, 60, "the next submit", proc
    )
    proc.stop()
    times = run_times(stack)
    foreign_run = times[len(runs_before) - 1]
    assert foreign_run["run_id"] == foreign and foreign_run["status"] == "completed"
    after = times[len(runs_before)]
    assert after["created_at"] >= foreign_run["completed_at"], "submitted after the foreign run"
    assert IDLE_WAIT in proc.log_tail(200)


async def test_its_own_pending_run_is_not_waited_out(stack: Stack) -> None:
    """The run of Ax3l's own unfinished seeding is the one the loop resumes waiting for."""
    stack.start(surrogate_seconds=RUN_SECONDS)
    assert stack.snakelab is not None
    client = SnakeLabClient(stack.snakelab.endpoint)
    stack.crash_at("seeding_waiting")
    (record,) = stack.events("simulation_submitted")
    own = str(record.process_id)
    await pause_once_running(client, own)

    proc = stack.orchestrator("random")
    status = stack.wait_for(
        lambda: (s := status_or_none(stack)) and s["phase"] == "seeding" and s,
        60,
        "the seeding wait",
        proc,
    )
    assert status["run_id"] == own and IDLE_WAIT not in (status["last_error"] or "")
    await client.resume(own)
    stack.wait_for(lambda: stack.count("golden_config_created"), 60, "the first golden", proc)
    proc.stop()
    assert stack.events("golden_config_created")[0].get("run_id") == own
    assert IDLE_WAIT not in proc.log_tail(200)
