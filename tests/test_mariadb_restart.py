"""A MariaDB restart mid-run is a pause: every service waits it out and the experiment goes on.

The test runs its own private MariaDB (``ax3l.shared.stack.mariadb``: ``scripts/mariadb.sh``
with a temporary run directory and a free port), so the instance the other tests share is never
stopped. The broker, the report server and the reference SnakeLab must survive each restart in
place; the orchestrator's loop ends its process on a database error (the spec: "Database errors
stop the loop"), and the test restarts it as the supervisor would: the new process waits for the
database at startup and continues where the events say.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ax3l.shared.db.cli import ensure_schema
from ax3l.shared.stack.mariadb import PrivateMariaDB
from ax3l.shared.stack.spec import http_get
from ax3l.shared.waiting import WaitTimeout, wait_until
from ax3l.testing.chaos import percentile as _percentile
from ax3l.testing.databases import TestDatabases
from ax3l.testing.plugin import free_port
from ax3l.testing.stack import Stack, check_history

REPO = Path(__file__).resolve().parent.parent
RESTARTS = 3
RUN_SECONDS = 1.0


@pytest.fixture(scope="module")
def second_mariadb() -> Iterator[PrivateMariaDB]:
    """A MariaDB of this module's own, stopped and deleted afterwards."""
    if shutil.which("mariadbd") is None and not Path("/usr/sbin/mariadbd").exists():
        pytest.skip("mariadb-server is not installed")
    server = PrivateMariaDB(REPO)
    try:
        server.start()
        yield server
    finally:
        server.destroy()


@pytest.fixture
def restart_databases(second_mariadb: PrivateMariaDB) -> TestDatabases:
    """The instance's own ``ax3l`` and ``snakelab`` databases (mariadb.sh made the grants)."""
    dbs = TestDatabases.of_server(second_mariadb.settings())
    ensure_schema(dbs.settings())
    return dbs


def _get(url: str) -> tuple[int | None, Any]:
    """(status, JSON body) of a GET; (None, None) when nothing answers."""
    return http_get(url, timeout=3)


class Supervisor:
    """Restarts the orchestrator after its loop ends it, as scripts/stack.py and compose do."""

    def __init__(self, stack: Stack):
        self.stack = stack
        self.proc = stack.orchestrator("tpe")
        self.restarts = 0
        self.exit_codes: list[int] = []

    def tend(self) -> bool:
        """Restart the orchestrator if it has exited; True when it did."""
        if self.proc.alive():
            return False
        code = self.proc.popen.returncode
        self.exit_codes.append(code)
        assert code == 1, f"orchestrator exited with {code}:\n{self.proc.log_tail()}"
        self.proc = self.stack.orchestrator("tpe")
        self.restarts += 1
        return True

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.stack.api_port}{path}"


def _completed_steps(stack: Stack) -> int:
    return stack.count("configuration_compared", "parameter_space_exhausted")


def _wait(condition: Any, timeout: float, what: str, supervisor: Supervisor) -> Any:

    def tended() -> Any:
        supervisor.tend()
        return condition()

    try:
        return wait_until(tended, timeout, what, interval=0.05)
    except WaitTimeout as error:
        pytest.fail(f"{error}\n{supervisor.proc.log_tail()}")


@pytest.mark.long  # minutes of the default suite's 15 (make test-long)
def test_a_mariadb_restart_mid_run_is_a_pause(
    second_mariadb: PrivateMariaDB, restart_databases: TestDatabases, tmp_path: Path
) -> None:
    """MariaDB stops and starts three times while the experiment runs: broker, reports and
    SnakeLab never exit, the orchestrator exits (code 1) and its restart waits for the database,
    and new steps complete after every restart without breaking the history's invariants."""
    stack = Stack(restart_databases, tmp_path)
    try:
        stack.start(surrogate_seconds=RUN_SECONDS)
        assert stack.broker is not None and stack.snakelab is not None
        reports_port = free_port()
        reports, _ = stack.spawn(
            "reports", tmp_path / "reports.log", {"AX3L_REPORTS_PORT": str(reports_port)}
        )
        broker_rest = stack.broker_port
        supervisor = Supervisor(stack)
        _wait(lambda: _completed_steps(stack) >= 2, 120, "two completed steps", supervisor)
        _wait(
            lambda: _get(f"http://127.0.0.1:{reports_port}/ready")[0] == 200,
            30,
            "the report server",
            supervisor,
        )

        ready_after: list[float] = []
        loop_after: list[float] = []
        step_after: list[float] = []
        waited_at_startup = 0
        for _ in range(RESTARTS):
            steps_before = _completed_steps(stack)
            second_mariadb.stop()
            stack.reconnect()
            # While it is down: the broker and the reports say so on /ready, and a restarted
            # orchestrator waits for the database instead of exiting again.
            with contextlib.suppress(WaitTimeout):  # it may well keep running
                wait_until(lambda: not supervisor.proc.alive(), 15, interval=0.05)
            if supervisor.tend():
                status = _wait(
                    lambda: (_get(supervisor.url("/api/status"))[1] or {}).get("waiting"),
                    30,
                    "the orchestrator's database wait",
                    supervisor,
                )
                assert status.startswith("waiting for the database since"), status
                code, body = _get(supervisor.url("/ready"))
                assert code == 503 and "waiting for the database" in str(body), body
                waited_at_startup += 1
            code, body = _get(f"http://127.0.0.1:{broker_rest}/ready")
            assert code == 503 and "database" in str(body), body
            code, body = _get(f"http://127.0.0.1:{reports_port}/")
            assert code == 503, (code, body)

            second_mariadb.start()
            back = time.monotonic()
            _wait(
                lambda: all(
                    _get(url)[0] == 200
                    for url in (
                        f"http://127.0.0.1:{broker_rest}/ready",
                        f"http://127.0.0.1:{reports_port}/ready",
                        supervisor.url("/ready"),
                    )
                ),
                60,
                "every service ready again",
                supervisor,
            )
            ready_after.append(time.monotonic() - back)
            _wait(
                lambda: (
                    (_get(supervisor.url("/api/status"))[1] or {}).get("phase")
                    not in (None, "starting", "stopped")
                ),
                60,
                "the loop past its startup",
                supervisor,
            )
            loop_after.append(time.monotonic() - back)
            _wait(
                lambda before=steps_before: _completed_steps(stack) > before,
                120,
                "a step completed after the restart",
                supervisor,
            )
            step_after.append(time.monotonic() - back)
            for proc in (stack.broker, reports):
                assert proc.alive(), f"{proc.name} exited:\n{proc.log_tail()}"
            assert stack.snakelab.process is not None
            assert stack.snakelab.process.poll() is None, stack.snakelab.log_tail()

        assert waited_at_startup >= 1, "no restarted orchestrator met the outage"
        supervisor.proc.stop()
        stack.wait_runs_recorded()
        check_history(stack)
        figures = (
            f"MariaDB restarts: {RESTARTS}; orchestrator restarts: {supervisor.restarts}"
            f" (exit codes {supervisor.exit_codes}); all /ready again after"
            f" p50 {statistics.median(ready_after):.2f} s,"
            f" p95 {_percentile(ready_after, 0.95):.2f} s;"
            f" the loop stepping again after p50 {statistics.median(loop_after):.2f} s,"
            f" p95 {_percentile(loop_after, 0.95):.2f} s;"
            f" first new step after p50 {statistics.median(step_after):.2f} s,"
            f" p95 {_percentile(step_after, 0.95):.2f} s (runs of {RUN_SECONDS:g} s)"
        )
        print(figures)
        (tmp_path / "recovery.txt").write_text(figures + "\n")
    finally:
        stack.close()


def test_errors_no_wait_can_fix_stop_each_service_with_advice(databases, tmp_path: Path) -> None:
    """A refused login is not an outage: the orchestrator, the broker and the report server
    exit 2 at once with a message that names the settings to check."""
    stack = Stack(databases, tmp_path)
    overrides = {
        "DB_PASSWORD": "wrong",
        "AX3L_ORCHESTRATOR_PORT": str(free_port()),
        "AX3L_TOOLBROKER_PORT": str(free_port()),
        "AX3L_REPORTS_PORT": str(free_port()),
        "AX3L_ZMQ_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
    }
    procs = [
        stack.spawn(name, tmp_path / f"{name}.log", overrides)[0]
        for name in ("orchestrator", "toolbroker", "reports")
    ]
    try:
        for proc in procs:
            code = proc.wait(60)
            assert code == 2, f"{proc.name} exited {code}:\n{proc.log_tail()}"
            assert "DB_PASSWORD" in proc.log_tail(), proc.log_tail()
    finally:
        for proc in procs:
            proc.kill()
