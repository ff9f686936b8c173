"""The server's database connections die under it (KILL, an outage): no run fails for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pymysql
import pytest

from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.shared.testing.plugin import TestDatabases as Databases
from snakelab.server_process import SnakeLabProcess

TERMINAL = ("completed", "failed", "cancelled")


async def wait_for(
    condition: Callable[[], Awaitable[Any]], within: float = 30.0, what: str = ""
) -> Any:
    deadline = time.monotonic() + within
    while not (found := await condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.02)
    return found


class Admin:
    """The admin login, reading the test's SnakeLab tables and killing the server's sessions."""

    def __init__(self, databases: Databases):
        self.databases = databases
        self.conn = databases.connect("admin", databases.snakelab_db)

    def rows(self) -> dict[str, tuple[Any, ...]]:
        """run_id -> (status, episode_count, error_message, stored episode rows)."""
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT run_id, status, episode_count, error_message,"
                " (SELECT COUNT(*) FROM simulation_episodes e WHERE e.run_id = r.run_id)"
                " FROM simulation_runs r ORDER BY id"
            )
            return {row[0]: row[1:] for row in cur.fetchall()}

    def kill_server_connections(self) -> int:
        """KILL every session of the SnakeLab user on this test's database; how many."""
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s AND DB = %s",
                (self.databases.snakelab_user, self.databases.snakelab_db),
            )
            ids = [row[0] for row in cur.fetchall()]
            killed = 0
            for thread_id in ids:
                try:
                    cur.execute(f"KILL CONNECTION {int(thread_id)}")
                    killed += 1
                except pymysql.err.OperationalError:
                    pass  # it ended on its own meanwhile
            return killed

    def close(self) -> None:
        self.conn.close()


async def test_killed_connections_mid_run_and_between_runs_fail_no_run(
    snakelab_tables: Databases,
) -> None:
    """Killing every server connection while runs train and while idle fails no run or submit."""
    admin = Admin(snakelab_tables)
    kills = 0
    recoveries: list[float] = []
    try:
        with SnakeLabProcess(snakelab_tables.env(), trainer="surrogate", seconds=1.5) as server:
            client = SnakeLabClient(server.endpoint)
            runs = [(await client.submit({"seed": seed})).run_id for seed in range(1, 4)]

            # While they train: kill, wait until the server stored progress again, kill again.
            async def one_running() -> list[str]:
                rows = admin.rows()
                if all(row[0] in TERMINAL for row in rows.values()):
                    return ["none"]
                return [r for r, row in rows.items() if row[0] == "running" and row[1]]

            while (running := await wait_for(one_running, what="a run to train")) != ["none"]:
                before = admin.rows()
                kills += admin.kill_server_connections()
                killed_at = time.monotonic()

                async def progressed(run_id: str = running[0], seen: Any = before) -> bool:
                    row = admin.rows()[run_id]
                    return row[0] != "running" or row[1] != seen[run_id][1]

                await wait_for(progressed, what="the server to store progress after a KILL")
                recoveries.append(time.monotonic() - killed_at)

            async def all_ended() -> bool:
                return all(row[0] in TERMINAL for row in admin.rows().values())

            await wait_for(all_ended, what="every run to end")
            # Idle now: every pooled connection is stale for the submit and the next start.
            assert admin.kill_server_connections() >= 1
            kills += 1
            runs += [(await client.submit({"seed": seed})).run_id for seed in (4, 5)]
            await wait_for(all_ended, what="the runs after the idle KILL to end")

            statuses = [(await client.status(run_id)).state for run_id in runs]
            rows = admin.rows()
            recoveries.sort()
            print(
                f"{kills} connections killed, {len(runs)} runs, progress stored again after"
                f" p50 {recoveries[len(recoveries) // 2]:.3f} s, max {recoveries[-1]:.3f} s"
            )
            assert statuses == ["completed"] * len(runs)
            assert [rows[run_id] for run_id in runs] == [("completed", 1500, None, 1500)] * len(
                runs
            )
            assert "Traceback" not in server.log_tail(200)
    finally:
        admin.close()
