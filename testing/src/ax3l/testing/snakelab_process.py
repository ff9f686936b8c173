"""A real reference SnakeLab as a subprocess (for tests and benchmarks of any service).

    with SnakeLabProcess(databases.env(), trainer="surrogate", seconds=0) as snakelab:
        client = SnakeLabClient(snakelab.endpoint)

The process (``ax3l.shared.stack.spec``'s SnakeLab, given what ``make run`` would give it of the
environment plus the test's settings) gets a free control port and a free events port on
127.0.0.1 and is ready once it answers ``health``. Its stderr goes to a log file whose tail is
shown when it fails to start.
``scratch_snakelab_database`` makes a throwaway ``snakelab_*`` database on the private MariaDB
(for fixtures that outlive one test, and for benchmarks).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ax3l.shared.ports import free_port
from ax3l.shared.processes import ManagedProcess, ProcessFailed
from ax3l.shared.snakelab_client import ping
from ax3l.shared.stack import spec
from ax3l.testing.databases import created_databases, mysql_connection


class SnakeLabProcess:
    """One ``python -m snakelab`` child process."""

    def __init__(
        self,
        env: Mapping[str, str],
        trainer: str = "surrogate",
        seconds: float = 0.0,
        port: int | None = None,
        events_port: int | None = None,
        extra_env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
    ):
        self.port = port or free_port()
        self.events_port = events_port if events_port is not None else free_port()
        self.service = spec.service("snakelab", {"SNAKELAB_PORT": str(self.port)})
        # What make run would give it of this environment, with the test's settings on top.
        self.env = self.service.environment(
            os.environ,
            {
                **env,
                "SNAKELAB_TRAINER": trainer,
                "SNAKELAB_SURROGATE_SECONDS": str(seconds),
                "SNAKELAB_DB_WAIT_SECONDS": "5",
                **(extra_env or {}),
            },
        )
        self._log_dir = log_dir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.log_path: Path | None = None
        self.managed: ManagedProcess | None = None

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.managed.popen if self.managed is not None else None

    @property
    def endpoint(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    @property
    def events_endpoint(self) -> str:
        return f"tcp://127.0.0.1:{self.events_port}"

    def start(self, timeout: float = 30.0) -> SnakeLabProcess:
        """Start the process and wait until it answers ``health``."""
        if self._log_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="snakelab-")
            folder = Path(self._tmp.name)
        else:
            folder = self._log_dir
        self.log_path = folder / f"snakelab-{self.port}.log"
        self.managed = ManagedProcess(
            "snakelab",
            [*self.service.argv(sys.executable), "--events-port", str(self.events_port)],
            self.env,
            self.log_path,
            log_lines=40,
        )
        try:
            self.managed.wait_ready(lambda: ping(self.endpoint), timeout)
        except ProcessFailed:
            self.close()
            raise
        return self

    def log_tail(self, lines: int = 40) -> str:
        return self.managed.log_tail(lines) if self.managed is not None else ""

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, as in a crash."""
        if self.managed is not None:
            self.managed.kill()

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``); returns the exit code."""
        return self.managed.stop(timeout) if self.managed is not None else None

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> SnakeLabProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def run_to_exit(env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m snakelab`` on a free port without events, run until it exits on its own
    (a server that must refuse to start), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "snakelab", "--port", str(free_port()), "--events-port", "0"],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass(frozen=True)
class ScratchDatabase:
    """A throwaway SnakeLab database and the SnakeLab user that may use it."""

    host: str
    port: int
    name: str
    user: str
    password: str

    def env(self) -> dict[str, str]:
        """``SNAKELAB_DB_*`` for a server process using this database."""
        return {
            "SNAKELAB_DB_HOST": self.host,
            "SNAKELAB_DB_PORT": str(self.port),
            "SNAKELAB_DB_USER": self.user,
            "SNAKELAB_DB_PASSWORD": self.password,
            "SNAKELAB_DB_NAME": self.name,
        }

    def connect(self) -> Any:
        """A blocking autocommit connection as the SnakeLab user."""
        return mysql_connection(self.host, self.port, self.user, self.password, self.name)


@contextmanager
def scratch_snakelab_database(db_env: Mapping[str, str]) -> Iterator[ScratchDatabase]:
    """An empty ``snakelab_s<hex>`` database (dropped afterwards), from ``.run/db.env`` values."""
    database = ScratchDatabase(
        host=db_env["DB_HOST"],
        port=int(db_env["DB_PORT"]),
        name=f"snakelab_s{secrets.token_hex(4)}",
        user=db_env["SNAKELAB_DB_USER"],
        password=db_env["SNAKELAB_DB_PASSWORD"],
    )
    grant = ("ALL PRIVILEGES", database.name, database.user)
    with created_databases(dict(db_env), [database.name], [grant]):
        yield database
