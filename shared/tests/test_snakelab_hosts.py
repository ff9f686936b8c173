"""Several SnakeLab hosts behind one client: two reference SnakeLab processes on one database."""

from __future__ import annotations

import pytest

from ax3l.shared.snakelab_client import SnakeLabClient, SnakeLabError, SnakeLabUnavailable
from ax3l.shared.snakelab_hosts import SnakeLabHosts, parse_endpoints, snakelab_client
from ax3l.shared.waiting import wait_until_async
from ax3l.testing.databases import TestDatabases
from ax3l.testing.snakelab_process import SnakeLabProcess


def test_the_endpoints_setting_is_parsed_and_checked() -> None:
    """Unset: the single endpoint; a list in order, each once; a malformed entry refused."""
    assert parse_endpoints(None, "tcp://127.0.0.1:1") == ["tcp://127.0.0.1:1"]
    assert parse_endpoints(" tcp://a:1, tcp://b:2,tcp://a:1 ", "x") == ["tcp://a:1", "tcp://b:2"]
    with pytest.raises(ValueError, match="not tcp://HOST:PORT"):
        parse_endpoints("tcp://a:1,,", "x")
    with pytest.raises(ValueError, match="'http://a:1'"):
        parse_endpoints("http://a:1", "x")
    assert type(snakelab_client(["tcp://a:1"], 1.0)) is SnakeLabClient
    assert isinstance(snakelab_client(["tcp://a:1", "tcp://b:2"], 1.0), SnakeLabHosts)


def host(databases: TestDatabases, name: str, seconds: float) -> SnakeLabProcess:
    return SnakeLabProcess(
        databases.env(), seconds=seconds, extra_env={"SNAKELAB_HOST_ID": name}
    ).start()


def hosts_of(databases: TestDatabases) -> dict[str, str]:
    rows = databases.query("SELECT run_id, host FROM simulation_runs", user="snakelab")
    return {str(run_id): str(name) for run_id, name in rows}


async def test_runs_submitted_together_train_side_by_side_and_are_routed_by_run(
    snakelab_tables: TestDatabases,
) -> None:
    """Two submits in a row go to the two idle hosts and run at the same time; a client that
    did not submit them finds each run on its host; a third waits behind the least busy."""
    a, b = host(snakelab_tables, "a", 4), host(snakelab_tables, "b", 4)
    try:
        client = SnakeLabHosts([a.endpoint, b.endpoint], timeout=3)
        first = (await client.submit({"seed": 1})).run_id
        second = (await client.submit({"seed": 2})).run_id
        assert {client.host_of(first), client.host_of(second)} == {a.endpoint, b.endpoint}
        assert hosts_of(snakelab_tables) == {first: "a", second: "b"}

        async def both_running() -> bool:
            states = [(await client.status(r)).state for r in (first, second)]
            return states == ["running", "running"]

        await wait_until_async(both_running, 20, "both runs training at once")
        other = SnakeLabHosts([a.endpoint, b.endpoint], timeout=3)
        assert (await other.status(second)).run_id == second
        assert other.host_of(second) == b.endpoint
        third = (await client.submit({"seed": 3})).run_id
        assert client.host_of(third) in (a.endpoint, b.endpoint)
        with pytest.raises(SnakeLabError) as unknown:
            await other.status("00000000-0000-4000-8000-000000000000")
        assert unknown.value.code == "run_not_found"
    finally:
        a.close()
        b.close()


async def test_a_host_that_does_not_answer_is_skipped_reported_and_used_again(
    snakelab_tables: TestDatabases,
) -> None:
    """Host a killed: submits go to b, a's run is unanswerable (it may be a's) rather than
    unknown, the change is reported once; a restarted, it is reported up and its run, failed
    by the restart, is run_not_found on both hosts (its row tells how it ended)."""
    a, b = host(snakelab_tables, "a", 120), host(snakelab_tables, "b", 2)
    changes: list[tuple[str, str]] = []

    async def on_change(endpoint: str, state: str) -> None:
        changes.append((endpoint, state))

    try:
        client = SnakeLabHosts([a.endpoint, b.endpoint], timeout=1, on_change=on_change)
        on_a = (await client.submit({"seed": 1})).run_id
        assert client.host_of(on_a) == a.endpoint
        a.kill()
        fresh = SnakeLabHosts([a.endpoint, b.endpoint], timeout=1, on_change=on_change)
        with pytest.raises(SnakeLabUnavailable):
            await fresh.status(on_a)
        on_b = (await fresh.submit({"seed": 2})).run_id
        assert fresh.host_of(on_b) == b.endpoint
        assert changes == [(a.endpoint, "down")]
        assert fresh.states[a.endpoint] == "down"
        a.close()
        restarted = SnakeLabProcess(
            snakelab_tables.env(),
            seconds=2,
            port=a.port,
            extra_env={"SNAKELAB_HOST_ID": "a"},
        ).start()
        try:
            with pytest.raises(SnakeLabError) as gone:
                await fresh.status(on_a)
            assert gone.value.code == "run_not_found"
            assert changes == [(a.endpoint, "down"), (a.endpoint, "up")]
            ((status,),) = snakelab_tables.query(
                "SELECT status FROM simulation_runs WHERE run_id = %s", (on_a,), user="snakelab"
            )
            assert status == "failed"
        finally:
            restarted.close()
    finally:
        a.close()
        b.close()
