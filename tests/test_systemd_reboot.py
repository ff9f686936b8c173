"""A reboot under systemd: the stack started as ``deploy/systemd/ax3l.service`` starts it (its
``ExecStart``: ``make run`` in the checkout), stopped as systemd stops it (SIGTERM to every
process of the unit's control group at once, MariaDB included), started again, and the
experiment goes on where its events say.

Without a systemd here, the control group is the ``ExecStart`` process with all its
descendants (the supervisor, the services, the orchestrator's MCP children) and the private
MariaDB, which ``scripts/mariadb.sh`` starts detached but which a control group would keep: it
is found by its data directory. Everything runs in a run directory of its own, with its own
MariaDB and ports, so the shared ``.run`` is never touched; make's ``-o install`` keeps the
test from re-syncing the shared virtual environment (``make run``'s first prerequisite).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from ax3l.shared.processes import ManagedProcess, descendants, process_alive
from ax3l.shared.stack.mariadb import PrivateMariaDB
from ax3l.testing.invariants import check, read_history
from ax3l.testing.plugin import free_port, read_env_file, wait_until

REPO = Path(__file__).resolve().parent.parent
UNIT = REPO / "deploy" / "systemd" / "ax3l.service"
STOP_TIMEOUT = 120.0  # the unit's TimeoutStopSec

pytestmark = pytest.mark.long  # a MariaDB initialised, two stack starts: a minute or more


def exec_start(run_dir: Path) -> list[str]:
    """The unit's ExecStart with this checkout filled in, and make's ``-o install``."""
    unit = UNIT.read_text().replace("@CHECKOUT@", str(REPO))
    (line,) = [entry for entry in unit.splitlines() if entry.startswith("ExecStart=")]
    argv = line.removeprefix("ExecStart=").split()
    assert Path(argv[0]).name == "make" and argv[-1] == "run", argv
    return [argv[0], "-o", "install", *argv[1:]]


def unit_path() -> str:
    """The unit's PATH (its ``Environment=PATH=``), with this machine's uv in front when it is
    elsewhere than in the user's ``~/.local/bin``."""
    unit = UNIT.read_text().replace("@HOME@", str(Path.home()))
    (line,) = [entry for entry in unit.splitlines() if entry.startswith("Environment=PATH=")]
    path = line.removeprefix("Environment=PATH=")
    uv = shutil.which("uv")
    return f"{Path(uv).parent}:{path}" if uv else path


class Unit:
    """The unit's processes, started and stopped as systemd would."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("AX3L_", "DB_", "SNAKELAB_"))
            },
            "PATH": unit_path(),
            "AX3L_RUN_DIR": str(folder),
            "AX3L_DEV_DB_PORT": str(free_port()),
            "SNAKELAB_PORT": str(free_port()),
            "SNAKELAB_EVENTS_PORT": "0",
            "SNAKELAB_TRAINER": "surrogate",
            "SNAKELAB_SURROGATE_SECONDS": "0.5",
            "AX3L_ZMQ_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
            "AX3L_REPORTS_PORT": str(free_port()),
            "AX3L_ORCHESTRATOR_PORT": str(free_port()),
            "AX3L_TOOLBROKER_PORT": str(free_port()),
            "AX3L_SEATS_PORT": str(free_port()),
            "AX3L_POLL_INTERVAL": "0.2",
            "AX3L_PROPOSER": "random",
        }
        self.proc: ManagedProcess | None = None
        self.boots = 0

    def start(self) -> None:
        self.boots += 1
        self.proc = ManagedProcess(
            "ax3l.service",
            exec_start(self.folder),
            self.env,
            self.folder / f"journal-{self.boots}.log",
            new_session=True,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
        )

    def control_group(self) -> set[int]:
        """Every live process a control group of the unit would hold."""
        found: set[int] = set()
        if self.proc is not None and self.proc.alive():
            found |= {self.proc.pid, *descendants(self.proc.pid)}
        data = str(self.folder / "mariadb").encode()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if data in (entry / "cmdline").read_bytes():
                        found |= {int(entry.name), *descendants(int(entry.name))}
        return {pid for pid in found if process_alive(pid)}

    def stop(self) -> float:
        """SIGTERM to the whole group at once; the seconds until it was gone. Fails if
        anything outlives the unit's stop timeout (systemd would SIGKILL it)."""
        began = time.monotonic()
        for pid in self.control_group():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        try:
            wait_until(
                lambda: not self.control_group(), STOP_TIMEOUT, "the unit to stop", interval=0.2
            )
        finally:
            for pid in self.control_group():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if self.proc is not None:
                self.proc.popen.poll()
        return time.monotonic() - began

    def journal(self) -> str:
        return "\n".join(
            path.read_text(errors="replace")[-4000:]
            for path in sorted(self.folder.glob("journal-*.log"))
        )

    def database(self) -> Any:
        values = read_env_file(self.folder / "db.env")
        return pymysql.connect(
            host="127.0.0.1",
            port=int(values["DB_PORT"]),
            user=values["AX3L_DB_ADMIN_USER"],
            password=values["AX3L_DB_ADMIN_PASSWORD"],
            database=values["AX3L_DB_NAME"],
            autocommit=True,
        )

    def count(self, name: str) -> int:
        with contextlib.suppress(OSError, pymysql.err.MySQLError):
            conn = self.database()
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT COUNT(*) FROM events WHERE name = %s", (name,))
                    return int(cur.fetchone()[0])
            finally:
                conn.close()
        return 0

    def survived(self) -> int:
        """With the unit stopped: start its MariaDB alone, check that the history keeps every
        invariant and has one seeding, stop it again; the comparisons it holds."""
        server = PrivateMariaDB(REPO, self.folder, int(self.env["AX3L_DEV_DB_PORT"]))
        server.start(180)
        try:
            conn = self.database()
            try:
                with conn.cursor() as cur:
                    cur.execute(
                        "SELECT COUNT(*) FROM events WHERE name = 'simulation_submitted'"
                        " AND source_name = 'InitialSeeding'"
                    )
                    assert int(cur.fetchone()[0]) == 1, "seeded more than once"
                snakelab = read_env_file(self.folder / "db.env")["AX3L_SNAKELAB_DB_NAME"]
                history = read_history(conn, snakelab)
            finally:
                conn.close()
            failed = [invariant for invariant in check(history) if not invariant.passed]
            assert not failed, "\n".join(f"{i.name}: {i.violations[:5]}" for i in failed)
            return self.count("configuration_compared")
        finally:
            server.stop(60)

    def wait_compared(self, count: int, timeout: float = 240) -> None:
        def ready() -> bool:
            assert self.proc is not None
            if not self.proc.alive():
                raise AssertionError(f"the unit's ExecStart exited:\n{self.journal()}")
            return self.count("configuration_compared") >= count

        try:
            wait_until(ready, timeout, f"{count} comparisons", interval=0.5)
        except Exception:
            print(self.journal())
            raise


@pytest.fixture
def unit() -> Iterator[Unit]:
    # Short: the MariaDB socket path must fit in a sockaddr_un.
    folder = Path(tempfile.mkdtemp(prefix="ax3l-unit-", dir="/tmp"))
    made = Unit(folder)
    try:
        yield made
    finally:
        with contextlib.suppress(Exception):
            made.stop()
        with contextlib.suppress(Exception):
            PrivateMariaDB(REPO, folder, int(made.env["AX3L_DEV_DB_PORT"])).stop(60)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_reboot_stops_the_unit_with_sigterm_and_the_experiment_continues(unit: Unit) -> None:
    """Boot: the loop seeds and compares. Shutdown: SIGTERM to the whole control group, gone
    well within the stop timeout without a SIGKILL, the history whole. Boot again: the same
    data, no second seeding, more comparisons, and every history invariant holds."""
    unit.start()
    unit.wait_compared(2)
    stopped_in = unit.stop()
    assert stopped_in < STOP_TIMEOUT
    print(f"the unit stopped on SIGTERM in {stopped_in:.1f} s")
    assert "supervisor stopped" in (unit.folder / "logs" / "stack.log").read_text()
    assert unit.count("configuration_compared") == 0, "MariaDB outlived the unit"
    first_boot = unit.survived()

    unit.start()
    unit.wait_compared(first_boot + 2)
    print(f"the second boot stopped on SIGTERM in {unit.stop():.1f} s")
    assert unit.survived() >= first_boot + 2


def test_exec_start_is_make_run_in_the_checkout() -> None:
    """What the reboot test starts is the unit's own command (make's -o install aside)."""
    argv = exec_start(Path("/tmp"))
    assert argv[:3] == ["/usr/bin/make", "-o", "install"] and argv[-2:] == [str(REPO), "run"]
