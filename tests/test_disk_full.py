"""A full disk under the database is a pause: writes fail with a clear error (``DiskFull``),
nothing is half-written, the loop retries with its backoff, and ``/ready`` and the status bar
say "disk full" until space is freed.

The real case: a private MariaDB (``ax3l.shared.stack.mariadb``, a free port and socket of its
own) whose data directory is a tmpfs of ``DISK_MB`` megabytes, mounted for the test (root
only; skipped elsewhere), filled with a file until the kernel says ENOSPC, and emptied again.
Unmounted and deleted in a ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from rich.console import Console

from ax3l.reports.terminal import _cards
from ax3l.shared.db.cli import ensure_schema
from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError, DiskFull, translate
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import AlertFailed
from ax3l.shared.readiness import database_problem
from ax3l.shared.stack.mariadb import PrivateMariaDB
from ax3l.shared.stack.spec import http_get
from ax3l.testing.databases import TestDatabases, create_snakelab_tables
from ax3l.testing.plugin import free_port
from ax3l.testing.stack import Stack, check_history

REPO = Path(__file__).resolve().parent.parent
# A fresh data directory takes about 128 MB (redo log, system and undo tablespaces, ibtmp1).
DISK_MB = 300
RUN_SECONDS = 1.0


# -- the error ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (1114, "The table 'event_messages' is full"),
        (1021, "Disk full (/var/lib/mysql/x); waiting for someone to free some space..."),
        (1030, 'Got error 28 "No space left on device" from storage engine InnoDB'),
        (3, "Error writing file './ax3l/events.ibd' (Errcode: 28 \"No space left on device\")"),
    ],
)
def test_mariadb_disk_full_errors_are_disk_full(code: int, message: str) -> None:
    """Each way MariaDB reports a full disk is a ``DiskFull`` (so a wait and a retry), whose
    message names the disk, the server's words and that nothing was committed."""
    error = translate(pymysql.err.OperationalError(code, message), "logging event x")
    assert isinstance(error, DiskFull), error
    text = str(error)
    assert text.startswith("logging event x: disk full on the database server")
    assert message in text and "rolled back" in text


def test_other_storage_engine_errors_are_not_disk_full() -> None:
    """An errno other than ENOSPC is a plain database error."""
    error = translate(
        pymysql.err.OperationalError(1030, 'Got error 122 "Disk quota" from storage engine'), "x"
    )
    assert type(error) is DatabaseError


def test_ax3l_status_shows_a_full_disk() -> None:
    """``ax3l status`` has a "disk full" line when the orchestrator's status says so."""
    full = "disk full since 2026-01-01T00:00:00+00:00: logging event x: disk full (1114)"
    console = Console(width=200, record=True)
    console.print(_cards({"phase": "backing off", "disk_full": full}))
    shown = console.export_text()
    assert "disk full" in shown and full in shown
    console = Console(width=200, record=True)
    console.print(_cards({"phase": "waiting"}))
    assert "disk full" not in console.export_text()


# -- a MariaDB on a small disk -------------------------------------------------------------------


def _mount(path: Path, size_mb: int) -> str | None:
    """Mount a tmpfs of ``size_mb`` on ``path``; None, or why it could not be."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    return None if done.returncode == 0 else f"mount failed: {done.stderr.strip()}"


def _unmount(path: Path) -> None:
    """Unmount, waiting for a server that is still closing its files."""
    for _ in range(60):
        if not os.path.ismount(path):
            return
        if subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode == 0:
            return
        time.sleep(0.5)
    subprocess.run(["umount", "--lazy", str(path)], capture_output=True, check=False)


class SmallDisk:
    """The tmpfs under the server's data directory, and a file that fills it."""

    def __init__(self, path: Path):
        self.path = path
        self.filler = path / "filler"

    def free_bytes(self) -> int:
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize

    def fill(self) -> None:
        """Write the filler until the kernel says ENOSPC."""
        chunk = b"\0" * (1 << 20)
        with open(self.filler, "ab", buffering=0) as out, contextlib.suppress(OSError):
            while True:
                out.write(chunk)
        assert self.free_bytes() == 0, self.free_bytes()

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def small_disk_mariadb() -> Iterator[tuple[PrivateMariaDB, SmallDisk]]:
    """A MariaDB of this module's own whose data directory is a ``DISK_MB`` MB tmpfs."""
    if shutil.which("mariadbd") is None and not Path("/usr/sbin/mariadbd").exists():
        pytest.skip("mariadb-server is not installed")
    # A short path: the server's socket lives under it.
    run_dir = Path(tempfile.mkdtemp(prefix="ax3l-df-"))
    data = run_dir / "mariadb" / "data"
    data.mkdir(parents=True)
    server = PrivateMariaDB(REPO, run_dir=run_dir)
    try:
        why = _mount(data, DISK_MB)
        if why is not None:
            pytest.skip(why)
        server.start()
        yield server, SmallDisk(data)
    finally:
        server.destroy()
        _unmount(data)
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture
def small_disk(small_disk_mariadb: tuple[PrivateMariaDB, SmallDisk]) -> Iterator[SmallDisk]:
    """The disk with room again after the test, whatever it did."""
    disk = small_disk_mariadb[1]
    try:
        yield disk
    finally:
        disk.free()


@pytest.fixture
def small_disk_databases(small_disk_mariadb: tuple[PrivateMariaDB, SmallDisk]) -> TestDatabases:
    """The server's own ``ax3l`` and ``snakelab`` databases, emptied for each test."""
    dbs = TestDatabases.of_server(small_disk_mariadb[0].settings())
    ensure_schema(dbs.settings())
    conn = dbs.connect("admin", dbs.ax3l_db)
    try:
        with conn.cursor() as cur:
            cur.execute("SET FOREIGN_KEY_CHECKS = 0")
            for table in ("experiment_highscores", "event_messages", "events"):
                cur.execute(f"DELETE FROM {table}")
    finally:
        conn.close()
    return dbs


def _counts(dbs: TestDatabases) -> dict[str, int]:
    return {
        table: dbs.query(f"SELECT COUNT(*) FROM {table}")[0][0]
        for table in ("events", "event_messages")
    }


async def test_a_write_on_a_full_disk_fails_whole_and_clearly_until_space_is_freed(
    small_disk_databases: TestDatabases, small_disk: SmallDisk
) -> None:
    """On a full disk an event's write fails with ``DiskFull`` and leaves neither its row nor
    its message; reads go on, ``/ready``'s check says "disk full since ..." (not an outage)
    until a write commits again once space is freed."""
    dbs = small_disk_databases
    create_snakelab_tables(dbs)  # the readiness check reads them
    db = Database(dbs.settings())
    log = EventLog(db)
    # Messages of 2 KB, as most of Ax3l's are: stored in the row's own page.
    content = AlertFailed(kind="disk", reason="x" * 2000)
    try:
        await log.log(content)
        small_disk.fill()
        refused: DiskFull | None = None
        for _ in range(20_000):  # the tablespace's last free pages fill first
            try:
                await log.log(content)
            except DiskFull as exc:
                refused = exc
                break
        assert refused is not None, "the full disk never refused a write"
        assert "disk full on the database server" in str(refused)
        stored = _counts(dbs)
        assert stored["events"] == stored["event_messages"], stored  # nothing half-written

        assert db.disk_full.active and not db.outage.active
        problem = await database_problem(db)
        assert problem is not None and problem.startswith("disk full since"), problem
        counted = await db.fetchone("SELECT COUNT(*) AS n FROM events")
        assert counted is not None and counted["n"] == stored["events"]
        assert db.disk_full.active, "a read must not end the disk-full spell"
        with pytest.raises(DiskFull):
            await log.log(content)
        assert _counts(dbs) == stored

        small_disk.free()
        await log.log(content)
        assert not db.disk_full.active
        assert await database_problem(db) is None
        after = _counts(dbs)
        assert after["events"] == after["event_messages"] == stored["events"] + 1
    finally:
        await db.close()


# -- the loop --------------------------------------------------------------------------------


def _get(url: str) -> tuple[int | None, Any]:
    return http_get(url, timeout=3)


def _completed_steps(stack: Stack) -> int:
    return stack.count("configuration_compared", "parameter_space_exhausted")


@pytest.mark.long
def test_the_loop_waits_out_a_full_disk_and_goes_on(
    small_disk_databases: TestDatabases, small_disk: SmallDisk, tmp_path: Path
) -> None:
    """The experiment runs on the small disk; the disk is filled: the orchestrator does not
    exit (nor does one started again meanwhile), its /api/status and /ready, the reports'
    /ready and status bar say "disk full";
    space freed, steps complete again and the history's invariants hold (SnakeLab's runs the
    full disk broke are failed runs, like any other)."""
    stack = Stack(small_disk_databases, tmp_path)
    try:
        stack.start(surrogate_seconds=RUN_SECONDS)
        # The reference SnakeLab fails a write the full disk refused: a run whose end it could
        # not store stays "running" in its table, and the loop fails it at the run deadline.
        env = {"AX3L_RUN_DEADLINE_SECONDS": "20"}
        orchestrator = stack.orchestrator("tpe", env=env)
        api = f"http://127.0.0.1:{stack.api_port}"
        reports_port = free_port()
        reports, _ = stack.spawn(
            "reports",
            tmp_path / "reports.log",
            {
                "AX3L_REPORTS_PORT": str(reports_port),
                "AX3L_ORCHESTRATOR_PORT": str(stack.api_port),
                "AX3L_REPORTS_STATUS_INTERVAL": "0.2",
            },
        )
        pages = f"http://127.0.0.1:{reports_port}"
        stack.wait_for(lambda: _completed_steps(stack) >= 2, 120, "two steps", orchestrator)

        small_disk.fill()
        filled = time.monotonic()
        status = stack.wait_for(
            lambda: (_get(f"{api}/api/status")[1] or {}).get("disk_full") and stack.status(),
            120,
            "the loop to report the full disk",
            orchestrator,
        )
        noticed = time.monotonic() - filled
        assert status["disk_full"].startswith("disk full since"), status
        assert "disk full on the database server" in status["disk_full"]
        code, ready = _get(f"{api}/ready")
        assert code == 503 and any(p.startswith("database: disk full") for p in ready["problems"])
        code, ready = stack.wait_for(
            lambda: (r := _get(f"{pages}/ready"))[0] == 503 and r, 30, "the reports' /ready"
        )
        assert ready["checks"] == {"database": True, "disk": False}, ready
        assert ready["problems"][0].startswith("disk: disk full since"), ready
        code, page = _get(f"{pages}/api/status")
        assert code == 200 and page["orchestrator"]["label"] == "Disk full", page
        # The loop keeps retrying, without exiting, for as long as the disk is full (a write
        # that still fits in a table's free pages may commit meanwhile and end the spell).
        steps = _completed_steps(stack)
        time.sleep(3)
        assert orchestrator.alive(), orchestrator.log_tail()
        assert _completed_steps(stack) <= steps + 1
        # Started again on the full disk (killed, on its port), it waits the same way.
        port = stack.api_port
        orchestrator.kill()
        orchestrator = stack.orchestrator("tpe", env={**env, "AX3L_ORCHESTRATOR_PORT": str(port)})
        stack.api_port = port
        stack.wait_for(
            lambda: (_get(f"{api}/api/status")[1] or {}).get("disk_full"),
            60,
            "the restarted loop to report the full disk",
            orchestrator,
        )
        time.sleep(2)
        assert orchestrator.alive(), orchestrator.log_tail()
        assert _completed_steps(stack) <= steps + 1

        small_disk.free()
        freed = time.monotonic()
        stack.wait_for(
            lambda: _completed_steps(stack) > steps + 1, 120, "a step after the disk", orchestrator
        )
        resumed = time.monotonic() - freed
        stack.wait_for(lambda: stack.status().get("disk_full") is None, 30, "disk_full cleared")
        assert _get(f"{api}/ready")[0] == 200
        stack.wait_for(lambda: _get(f"{pages}/ready")[0] == 200, 30, "the reports ready")
        assert orchestrator.alive() and reports.alive()
        orchestrator.stop()
        stack.wait_runs_recorded()
        check_history(stack)
        print(
            f"disk full noticed after {noticed:.1f} s; a step completed {resumed:.1f} s after"
            f" the space was freed; {_completed_steps(stack)} steps in all"
        )
    finally:
        stack.close()
