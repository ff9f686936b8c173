"""Helpers of the report server's tests: private databases, the app in-process and as a real
uvicorn subprocess, a SnakeLab control socket stand-in."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from reports_history import Replay

from ax3l.reports.app import create_app
from ax3l.reports.settings import ReportsSettings
from ax3l.shared.processes import ManagedProcess, http_ok
from ax3l.testing.databases import TestDatabases, scratch_databases
from ax3l.testing.plugin import free_port, wait_until
from ax3l.testing.zmq_peer import ScriptedPeer, snakelab_reply


@contextlib.contextmanager
def private_databases(db_env: dict[str, str]) -> Iterator[TestDatabases]:
    """Like the plugin's ``databases`` fixture, for wider scopes (the data is read-only)."""
    with scratch_databases(db_env, prefix="r", with_snakelab_tables=True) as dbs:
        yield dbs


@dataclass
class Experiment:
    """The shared data set: real runs in SnakeLab's tables and the replayed history."""

    dbs: TestDatabases
    runs: list[Any]
    replay: Replay


class FakeSnakeLab(ScriptedPeer):
    """SnakeLab's control socket (the 2.x envelope) answering ``simulation.active`` with
    ``self.active``."""

    def __init__(self) -> None:
        self.active: dict[str, Any] | None = None
        super().__init__(lambda request: snakelab_reply(request, self._active_reply()))

    def _active_reply(self) -> dict[str, Any]:
        return {"status": "ok", "payload": {"run": self.active}}


def running_status(run_id: str) -> dict[str, Any]:
    """A status object of the contract for a run in progress."""
    return {
        "run_id": run_id,
        "state": "running",
        "epochs": 1500,
        "completed_epochs": 700,
        "total_steps": 123456,
        "high_score": 35,
        "total_reward": 12.5,
        "epsilon_injections": 0,
        "last_loss": 0.25,
        "move_delay_ms": 0,
        "last_episode": None,
    }


def reports_settings(dbs: TestDatabases, **overrides: Any) -> ReportsSettings:
    values: dict[str, Any] = {
        "DB_HOST": dbs.host,
        "DB_PORT": dbs.port,
        "DB_USER": dbs.ax3l_user,
        "DB_PASSWORD": dbs.ax3l_password,
        "AX3L_DB_NAME": dbs.ax3l_db,
        "AX3L_SNAKELAB_DB_NAME": dbs.snakelab_db,
        # Nothing listens here unless a test passes a fake SnakeLab's endpoint.
        "AX3L_SNAKELAB_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
        # Nor here: a developer's running orchestrator must not leak into the tests.
        "AX3L_ORCHESTRATOR_URL": f"http://127.0.0.1:{free_port()}",
        "AX3L_REPORTS_STATUS_TIMEOUT": 0.3,
        "AX3L_REPORTS_STATUS_INTERVAL": 0.2,
    }
    values.update(overrides)
    return ReportsSettings(**values)


@contextlib.asynccontextmanager
async def app_client(settings: ReportsSettings) -> AsyncIterator[httpx.AsyncClient]:
    """The app in-process, lifespan entered, behind an httpx client."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://reports") as client:
            yield client


@dataclass
class Server:
    url: str
    process: ManagedProcess


@contextlib.contextmanager
def reports_server(
    dbs: TestDatabases,
    log_path: Path,
    snakelab_endpoint: str | None = None,
    orchestrator_url: str | None = None,
) -> Iterator[Server]:
    """``ax3l-reports`` as a real subprocess (uvicorn) on a free port; stopped afterwards."""
    port = free_port()
    env = {
        **os.environ,
        **dbs.env(),
        "AX3L_HTTP_HOST": "127.0.0.1",
        "AX3L_REPORTS_PORT": str(port),
        "AX3L_SNAKELAB_ENDPOINT": snakelab_endpoint or f"tcp://127.0.0.1:{free_port()}",
        "AX3L_ORCHESTRATOR_URL": orchestrator_url or f"http://127.0.0.1:{free_port()}",
        "AX3L_REPORTS_STATUS_TIMEOUT": "0.3",
        "AX3L_REPORTS_STATUS_INTERVAL": "0.5",
    }
    log_path.unlink(missing_ok=True)
    process = ManagedProcess(
        "ax3l-reports", [sys.executable, "-m", "ax3l.reports.main"], env, log_path
    )
    url = f"http://127.0.0.1:{port}"
    try:
        process.wait_ready(lambda: http_ok(f"{url}/health"), timeout=30)
        yield Server(url, process)
    finally:
        process.stop(10)


class StatusServer:
    """A tiny real HTTP server answering ``GET /api/status`` with ``self.status`` as JSON.

    ``hang`` makes it hold every request until released, like an orchestrator stuck in a
    long call; ``close`` releases and stops it.
    """

    def __init__(self, status: dict[str, Any]) -> None:
        self.status = status
        self.hang = threading.Event()
        self._release = threading.Event()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if owner.hang.is_set():
                    owner._release.wait(30)
                body = json.dumps(owner.status).encode()
                self.send_response(200 if self.path == "/api/status" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class OrchestratorStatusApi:
    """The orchestrator's real status API (its FastAPI app under uvicorn) in a thread, over a
    live ``LoopStatus`` the test changes."""

    def __init__(self, dbs: TestDatabases, status: Any) -> None:
        import uvicorn

        from ax3l.orchestrator.status_api import ApiResources, create_app
        from ax3l.shared.db.database import Database
        from ax3l.shared.snakelab_client import SnakeLabClient

        self.status = status
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        settings = dbs.settings()
        self._ready = threading.Event()

        async def serve() -> None:
            db = Database(settings)
            resources = ApiResources(
                db, SnakeLabClient(f"tcp://127.0.0.1:{free_port()}", timeout=0.2), status
            )
            config = uvicorn.Config(
                create_app(resources), host="127.0.0.1", port=port, log_level="warning"
            )
            self._server = uvicorn.Server(config)
            self._ready.set()
            try:
                await self._server.serve()
            finally:
                await db.close()

        self._thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
        self._thread.start()
        self._ready.wait(10)

        wait_until(
            lambda: http_ok(f"{self.url}/health"),
            timeout=15,
            interval=0.05,
            what="the orchestrator's status API",
        )

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
