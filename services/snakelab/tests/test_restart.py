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


async def test_sigkill_mid_run_then_restart_fails_the_rows_and_forgets_the_runs(
    snakelab_tables: Databases,
) -> None:
    """After SIGKILL mid-run, a restart fails running and queued rows; status is run_not_found."""
    env = snakelab_tables.env()
    with SnakeLabProcess(env, trainer="surrogate", seconds=120) as first:
        client = SnakeLabClient(first.endpoint)
        running = (await client.submit({"seed": 1})).run_id
        queued = (await client.submit({"seed": 2})).run_id

        async def in_progress() -> bool:
            row = rows(snakelab_tables).get(running)
            return row is not None and row[0] == "running" and (row[2] or 0) >= 2

        await wait_until_async(in_progress, 20, "the first run to be running with episodes stored")
        first.kill()
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

        await wait_until_async(fresh_running, 20, "the new submission to run")
        await client.cancel(fresh.run_id)


async def test_sigterm_fails_unfinished_runs_at_once(snakelab_tables: Databases) -> None:
    """A graceful stop stores the running and queued runs as failed before exiting 0."""
    with SnakeLabProcess(snakelab_tables.env(), trainer="surrogate", seconds=120) as server:
        client = SnakeLabClient(server.endpoint)
        running = (await client.submit({"seed": 1})).run_id
        queued = (await client.submit({"seed": 2})).run_id

        async def started() -> bool:
            return (await client.status(running)).completed_epochs >= 1

        await wait_until_async(started, 20, "the first run to start")
        assert server.stop() == 0
    after = rows(snakelab_tables)
    assert after[running][:2] == ("failed", STOPPED)
    assert after[queued][:2] == ("failed", STOPPED)
    assert after[running][2] >= 1  # the episodes it ran are counted


async def test_a_hosts_restart_fails_only_its_own_runs_in_a_shared_database(
    snakelab_tables: Databases,
) -> None:
    """Two hosts (SNAKELAB_HOST_ID a and b) share one database; host a is killed mid-run and
    restarted: its running run is failed, host b's running run goes on and completes, and
    each row names the host that ran it."""
    env = snakelab_tables.env()
    with (
        SnakeLabProcess(env, seconds=6, extra_env={"SNAKELAB_HOST_ID": "b"}) as host_b,
        SnakeLabProcess(env, seconds=120, extra_env={"SNAKELAB_HOST_ID": "a"}) as host_a,
    ):
        client_a, client_b = SnakeLabClient(host_a.endpoint), SnakeLabClient(host_b.endpoint)
        on_a = (await client_a.submit({"seed": 1})).run_id
        on_b = (await client_b.submit({"seed": 2})).run_id

        async def both_running() -> bool:
            found = rows(snakelab_tables)
            return all(found.get(r, ("",))[0] == "running" for r in (on_a, on_b))

        await wait_until_async(both_running, 20, "a run on each host")
        host_a.kill()
        host_a.close()
        with SnakeLabProcess(env, seconds=120, extra_env={"SNAKELAB_HOST_ID": "a"}):
            after = rows(snakelab_tables)
            assert after[on_a][:2] == ("failed", STOPPED)
            assert after[on_b][0] == "running"

            async def b_completed() -> bool:
                return rows(snakelab_tables)[on_b][0] == "completed"

            await wait_until_async(b_completed, 30, "host b's run to complete")
        hosts = dict(
            snakelab_tables.query("SELECT run_id, host FROM simulation_runs", user="snakelab")
        )
        assert (hosts[on_a], hosts[on_b]) == ("a", "b")


async def test_without_a_host_id_a_restart_fails_every_unfinished_run_as_before(
    snakelab_tables: Databases,
) -> None:
    """The default (no SNAKELAB_HOST_ID, one host): a restart fails another process's running
    run too, as the real SnakeLab does; rows store no host."""
    env = snakelab_tables.env()
    with SnakeLabProcess(env, seconds=120) as other:
        running = (await SnakeLabClient(other.endpoint).submit({"seed": 1})).run_id

        async def started() -> bool:
            return rows(snakelab_tables).get(running, ("",))[0] == "running"

        await wait_until_async(started, 20, "the run to start")
        with SnakeLabProcess(env, seconds=120):
            assert rows(snakelab_tables)[running][:2] == ("failed", STOPPED)
        ((host,),) = snakelab_tables.query(
            "SELECT host FROM simulation_runs WHERE run_id = %s", (running,), user="snakelab"
        )
        assert host is None


def test_a_table_of_an_older_version_gains_the_host_column_at_startup(
    snakelab_tables: Databases,
) -> None:
    """A ``simulation_runs`` without ``host`` (an older reference SnakeLab's) gets it when the
    server starts, and the rows already there are kept."""
    snakelab_tables.query("ALTER TABLE simulation_runs DROP COLUMN host", user="snakelab")
    with SnakeLabProcess(snakelab_tables.env()):
        columns = snakelab_tables.query(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s"
            " AND TABLE_NAME = 'simulation_runs'",
            (snakelab_tables.snakelab_db,),
            user="snakelab",
        )
    assert ("host",) in columns
