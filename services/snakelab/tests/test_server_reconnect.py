"""The server's database connections die under it (KILL, an outage): no run fails for it."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pymysql
import pytest

from ax3l.shared.snakelab_client import SnakeLabClient, SnakeLabError
from ax3l.shared.waiting import wait_until_async
from ax3l.testing.databases import TestDatabases as Databases
from ax3l.testing.plugin import free_port
from ax3l.testing.snakelab_process import SnakeLabProcess, run_to_exit

TERMINAL = ("completed", "failed", "cancelled")


async def wait_for(
    condition: Callable[[], Awaitable[Any]], within: float = 30.0, what: str = ""
) -> Any:
    return await wait_until_async(condition, within, what)


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
            # Idle now: every pooled connection is stale for the submit and the next start
            # (those the loop killed last and never used again are already gone).
            kills += admin.kill_server_connections()
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


class DatabaseCable:
    """A TCP proxy between the server and MariaDB that a test can cut and reconnect.

    Cut: every connection through it is closed and new ones are refused, as when the database
    server is down; MariaDB itself (shared by every test) is never touched.
    """

    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self.port = free_port()
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.connect()

    def connect(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._open = self._open, []
        for sock in [s for s in (listener,) if s is not None] + sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


async def test_a_run_outlives_an_outage_and_is_stored_when_the_database_is_back(
    snakelab_tables: Databases,
) -> None:
    """During an outage the server answers, refuses submits, keeps the run; it ends stored."""
    admin = Admin(snakelab_tables)
    cable = DatabaseCable(snakelab_tables.host, snakelab_tables.port)
    env = {**snakelab_tables.env(), "SNAKELAB_DB_PORT": str(cable.port)}
    try:
        with SnakeLabProcess(env, trainer="surrogate", seconds=1.5) as server:
            client = SnakeLabClient(server.endpoint)
            run_id = (await client.submit({"seed": 7})).run_id

            async def training() -> bool:
                row = admin.rows()[run_id]
                return row[0] == "running" and row[1] > 0

            await wait_for(training, what="the run to store its first episodes")
            cable.cut()
            cut_at = time.monotonic()

            async def outage_noticed() -> bool:
                return "database unavailable while" in server.log_tail(200)

            await wait_for(outage_noticed, what="the server to notice the outage")
            with pytest.raises(SnakeLabError) as refused:
                await client.submit({"seed": 8})
            assert refused.value.message.startswith("server error: storing run ")
            assert "database unavailable" in refused.value.message
            assert (await client.health()).service == "snake-lab"
            status = await client.status(run_id)
            assert status.state == "running"  # waiting in place, never failed for the outage
            assert server.process is not None and server.process.poll() is None

            cable.connect()
            reconnected_at = time.monotonic()

            async def completed() -> bool:
                state = (await client.status(run_id)).state
                assert state in ("running", "completed")
                return state == "completed"

            await wait_for(completed, what="the run to end after the outage")
            print(
                f"outage {reconnected_at - cut_at:.2f} s; run completed"
                f" {time.monotonic() - reconnected_at:.2f} s after the database came back"
            )
            assert admin.rows() == {run_id: ("completed", 1500, None, 1500)}
            log = server.log_tail(200)
            assert "database back after" in log and "Traceback" not in log
    finally:
        cable.cut()
        admin.close()


def test_a_wrong_password_stops_the_server_at_once_with_what_to_fix(
    snakelab_tables: Databases,
) -> None:
    """A refused login is not waited out: exit 1 at once, naming the settings to check."""
    env = {
        **os.environ,
        **snakelab_tables.env(),
        "SNAKELAB_DB_PASSWORD": "not-the-password",
        "SNAKELAB_DB_WAIT_SECONDS": "60",
    }
    started = time.monotonic()
    done = run_to_exit(env, 50)
    assert done.returncode == 1
    assert time.monotonic() - started < 30  # far below the 60 s it would wait for an outage
    assert "check SNAKELAB_DB_USER and SNAKELAB_DB_PASSWORD" in done.stderr
    assert "not-the-password" not in done.stderr


async def test_privileges_revoked_under_a_running_server_stop_it_with_what_to_fix(
    snakelab_tables: Databases,
) -> None:
    """Losing its privileges is not an outage: the server exits 1 saying what to grant."""
    admin = Admin(snakelab_tables)
    grant = f"`{snakelab_tables.snakelab_db}`.* TO '{snakelab_tables.snakelab_user}'@'%'"
    revoked = False
    try:
        with SnakeLabProcess(snakelab_tables.env(), trainer="surrogate", seconds=30) as server:
            client = SnakeLabClient(server.endpoint)
            await client.submit({"seed": 1})
            with admin.conn.cursor() as cur:
                cur.execute(f"REVOKE ALL PRIVILEGES ON {grant.replace(' TO ', ' FROM ')}")
            revoked = True
            admin.kill_server_connections()  # its next connection meets the revoked grant
            assert server.process is not None
            code = server.process.wait(30)
            assert code == 1
            assert "grant SnakeLab's user all privileges on its database" in server.log_tail()
    finally:
        if revoked:
            with admin.conn.cursor() as cur:
                cur.execute(f"GRANT ALL PRIVILEGES ON {grant}")
        admin.close()
