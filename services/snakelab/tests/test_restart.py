"""What a SnakeLab restart leaves behind: failed rows with the real message, unknown runs."""

from __future__ import annotations

import pytest

from ax3l.shared.snakelab_client import SnakeLabClient, SnakeLabError
from ax3l.shared.waiting import wait_until_async
from ax3l.testing.databases import TestDatabases as Databases
from ax3l.testing.snakelab_process import SnakeLabProcess

STOPPED = "Server stopped before run completed"


def rows(databases: Databases) -> dict[str, tuple]:
    found = databases.query(
        "SELECT run_id, status, error_message, episode_count, completed_at FROM simulation_runs",
        user="snakelab",
    )
    return {row[0]: row[1:] for row in found}


def episode_rows(databases: Databases, run_id: str) -> int:
    ((count,),) = databases.query(
        "SELECT COUNT(*) FROM simulation_episodes WHERE run_id = %s", (run_id,), user="snakelab"
    )
    return int(count)


async def wait_for(condition, within: float = 20.0, what: str = "") -> None:  # type: ignore[no-untyped-def]
    await wait_until_async(condition, within, what)


async def test_sigkill_mid_run_then_restart_fails_the_rows_and_forgets_the_runs(
    snakelab_tables: Databases,
) -> None:
    """After SIGKILL mid-run, a restart fails running and queued rows; status is run_not_found."""
    env = snakelab_tables.env()
    first = SnakeLabProcess(env, trainer="surrogate", seconds=120).start()
    try:
        client = SnakeLabClient(first.endpoint)
        running = (await client.submit({"seed": 1})).run_id
        queued = (await client.submit({"seed": 2})).run_id

        async def in_progress() -> bool:
            row = rows(snakelab_tables).get(running)
            return row is not None and row[0] == "running" and (row[2] or 0) >= 2

        await wait_for(in_progress, what="the first run to be running with episodes stored")
        first.kill()
    finally:
        first.close()
    before = rows(snakelab_tables)
    assert before[running][0] == "running"
    assert before[queued][0] == "queued"
    stored_episodes = episode_rows(snakelab_tables, running)

    with SnakeLabProcess(env, trainer="surrogate", seconds=120) as second:
        after = rows(snakelab_tables)
        for run_id in (running, queued):
            status, message, _, completed_at = after[run_id]
            assert (status, message) == ("failed", STOPPED)
            assert completed_at is not None
        assert episode_rows(snakelab_tables, running) == stored_episodes  # history kept

        client = SnakeLabClient(second.endpoint)
        for run_id in (running, queued):
            with pytest.raises(SnakeLabError) as caught:
                await client.status(run_id)
            assert caught.value.code == "run_not_found"
        assert await client.active() is None

        fresh = await client.submit({"seed": 3})
        assert fresh.state == "queued"

        async def fresh_running() -> bool:
            return (await client.status(fresh.run_id)).completed_epochs >= 1

        await wait_for(fresh_running, what="the new submission to run")
        await client.cancel(fresh.run_id)


async def test_sigterm_fails_unfinished_runs_at_once(snakelab_tables: Databases) -> None:
    """A graceful stop stores the running and queued runs as failed before exiting 0."""
    server = SnakeLabProcess(snakelab_tables.env(), trainer="surrogate", seconds=120).start()
    try:
        client = SnakeLabClient(server.endpoint)
        running = (await client.submit({"seed": 1})).run_id
        queued = (await client.submit({"seed": 2})).run_id

        async def started() -> bool:
            return (await client.status(running)).completed_epochs >= 1

        await wait_for(started, what="the first run to start")
        assert server.stop() == 0
    finally:
        server.close()
    after = rows(snakelab_tables)
    assert after[running][:2] == ("failed", STOPPED)
    assert after[queued][:2] == ("failed", STOPPED)
    assert after[running][2] >= 1  # the episodes it ran are counted
