"""A private MariaDB of its own (``scripts/mariadb.sh`` on a throwaway run directory and a free
port: the shared one under ``.run`` is never touched), a ``supervisor.Running`` too."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ax3l.shared.env_files import read_env_file
from ax3l.shared.ports import free_port
from ax3l.shared.processes import kill_all, process_alive
from ax3l.shared.waiting import WaitTimeout, wait_until


class PrivateMariaDB:
    """One MariaDB server, started, stopped and restarted with ``<repo>/scripts/mariadb.sh``."""

    returncode = None  # not our child: its exit code is unknown

    def __init__(self, repo: Path, run_dir: Path | None = None, port: int | None = None):
        self.script = repo / "scripts" / "mariadb.sh"
        self._owned = run_dir is None
        # A short path: the server's Unix socket lives in it (sun_path is 108 bytes).
        self.run_dir = run_dir or Path(tempfile.mkdtemp(prefix="ax3l-db-"))
        self.port = port or free_port()
        self.pidfile = self.run_dir / "mariadb" / "mysqld.pid"
        self.error_log = self.run_dir / "mariadb" / "error.log"

    @property
    def env(self) -> dict[str, str]:
        """The script's environment: this server's run directory and port."""
        return {**os.environ, "AX3L_RUN_DIR": str(self.run_dir), "AX3L_DEV_DB_PORT": str(self.port)}

    def _script(self, action: str, timeout: float) -> None:
        done = subprocess.run(
            ["bash", str(self.script), action],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"mariadb.sh {action} failed ({done.returncode}): {done.stdout}{done.stderr}"
            )

    def start(self, timeout: float = 120.0) -> PrivateMariaDB:
        """``mariadb.sh start``: returns once the server answers (raises when it did not)."""
        if self.pidfile.exists() and not self.alive():
            # A SIGKILLed server may linger as a zombie until PID 1 reaps it; the script
            # would take it for a live server. A supervisor knows its child died.
            self.pidfile.unlink(missing_ok=True)
        self._script("start", timeout)
        return self

    def stop(self, timeout: float = 120.0) -> None:
        """``mariadb.sh stop``: a clean shutdown."""
        self._script("stop", timeout)

    @property
    def pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        return self.pid is not None and process_alive(self.pid)

    def pids(self) -> list[int]:
        """The server's process (what a freeze stops)."""
        pid = self.pid
        return [pid] if pid is not None and process_alive(pid) else []

    def kill_tree(self) -> None:
        """SIGKILL the server, as in a crash, and wait until it is gone."""
        pid = self.pid
        if pid is not None:
            kill_all([pid])
            with contextlib.suppress(WaitTimeout):
                wait_until(lambda: not process_alive(pid), 10)

    def stop_group(self, timeout: float = 60.0) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self.stop(timeout)
        if self.alive():
            self.kill_tree()

    def output_since_start(self, lines: int = 5) -> str:
        """The error log's tail (why it died)."""
        try:
            return "\n".join(self.error_log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def settings(self) -> dict[str, str]:
        """Its ``db.env``: the logins and databases ``mariadb.sh`` made."""
        return read_env_file(self.run_dir / "db.env")

    def destroy(self) -> None:
        """Stop the server and, when this object made the run directory, delete it."""
        if self.alive():
            self.stop_group()
        if self._owned:
            shutil.rmtree(self.run_dir, ignore_errors=True)
