"""``ax3l-orchestrator``: the experiment loop and its status API in one process.

    ax3l-orchestrator [--url http://HOST:27770] [--proposer llm|tpe|random] [--output PATH]

Without a model URL (``--url`` or ``AX3L_LLM_URL``) the built-in ``tpe`` proposer runs the
experiment. The status API listens on ``AX3L_HTTP_HOST``:``AX3L_ORCHESTRATOR_PORT`` (28871).
Exit codes: 0 stopped by a signal, 1 a fatal error (message on stderr), 2 bad configuration
(including database errors no wait can fix: credentials, privileges, schema version).

A database outage is a pause: at startup the orchestrator waits for the database with backoff
(``/api/status`` and ``/ready`` say "waiting for the database since ..."), then continues
where the events say. Once the loop runs, a database error stops it (exit 1), as the spec
says; the supervisor restarts the process, which waits again. Two kinds only fail the step,
which is retried with the loop's backoff: a statement timeout, and a write the database's full
disk refused (``DiskFull``: ``/api/status`` has ``disk_full`` until a write commits again).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import uvicorn

from ax3l.orchestrator.alerts import AlertWatcher
from ax3l.orchestrator.llm_client import shown_url
from ax3l.orchestrator.loop import FATAL, ExperimentLoop
from ax3l.orchestrator.mcp_session import bound_session
from ax3l.orchestrator.proposers import ProposerDeps, make_proposer
from ax3l.orchestrator.raw_capture import RawCapture
from ax3l.orchestrator.run_models import RunModels
from ax3l.orchestrator.seat_server import QuietServer
from ax3l.orchestrator.services import Runs
from ax3l.orchestrator.session_pool import SessionPool
from ax3l.orchestrator.startup import prepare
from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.orchestrator.status_api import ApiResources, create_app
from ax3l.orchestrator.waiting import RunWaiter
from ax3l.shared.alerts import Alerts, NotifyUrlsInvalid, notifier_from
from ax3l.shared.config_schema import ConfigSchema, SchemaFileError, load_schema
from ax3l.shared.crash_points import UnknownCrashPoint, arm, armed_points
from ax3l.shared.db.availability import wait_for_database
from ax3l.shared.db.cli import ensure_schema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError, DatabaseMisconfigured, DatabaseUnavailable
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import SnakeLabHostDown, SnakeLabHostUp
from ax3l.shared.settings import LLM_PROPOSERS, PROPOSER_NAMES, OrchestratorSettings
from ax3l.shared.snakelab_hosts import SnakeLabHosts, snakelab_client
from ax3l.shared.submit_once import OnceSubmitter
from ax3l.shared.tasks import stop_task
from ax3l.shared.tool_channel import settle_does_not_fit

logger = logging.getLogger("ax3l.orchestrator")


class ConfigurationError(ValueError):
    """The command line or settings cannot run the loop."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ax3l-orchestrator",
        description="Ax3l's round-robin experiment loop and its status API.",
    )
    parser.add_argument(
        "--url", help="model server (llama-server) base URL, e.g. http://HOST:27770 (AX3L_LLM_URL)"
    )
    parser.add_argument(
        "--proposer",
        choices=PROPOSER_NAMES,
        help="who proposes values (AX3L_PROPOSER; default llm with a URL, else tpe)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="raw capture directory (AX3L_OUTPUT_DIR); capture needs AX3L_RAW_LOGS_ENABLED=true",
    )
    parser.add_argument("--host", help="status API host (AX3L_HTTP_HOST)")
    parser.add_argument("--port", type=int, help="status API port (AX3L_ORCHESTRATOR_PORT)")
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def configure(
    args: argparse.Namespace, settings: OrchestratorSettings
) -> tuple[OrchestratorSettings, str, str]:
    """Settings with the flags applied, the proposer name, and a plain note about the choice."""
    updates: dict[str, object] = {}
    if args.url:
        updates["llm_url"] = args.url
    if args.output:
        updates["output_dir"] = args.output
    if args.host:
        updates["http_host"] = args.host
    if args.port is not None:
        updates["orchestrator_port"] = args.port
    settings = settings.model_copy(update=updates)
    name = args.proposer or settings.proposer
    if name is not None and name not in PROPOSER_NAMES:
        raise ConfigurationError(
            f"AX3L_PROPOSER={name!r} is not a proposer; choose one of {', '.join(PROPOSER_NAMES)}"
        )
    if name in LLM_PROPOSERS and not settings.llm_url:
        raise ConfigurationError(f"the {name} proposer needs a model server: --url or AX3L_LLM_URL")
    if name is None:
        name = "llm" if settings.llm_url else "tpe"
    if name in LLM_PROPOSERS:
        note = f"proposer: {name}, model server {shown_url(settings.llm_url or '')}"
    elif name == "external":
        note = (
            f"proposer: external, seats at http://{settings.seats_host}:{settings.seats_port}/mcp"
            f" (fallback {settings.llm_fallback} after {settings.external_deadline:g} s)"
        )
    elif settings.llm_url:
        note = f"proposer: {name} (the model server {shown_url(settings.llm_url)} is not used)"
    elif args.proposer or settings.proposer:
        note = f"proposer: {name}"
    else:
        note = (
            "proposer: tpe. No model server is configured (--url / AX3L_LLM_URL), so the"
            " built-in TPE optimizer proposes the values instead of an LLM"
        )
    return settings, name, note


@dataclass(frozen=True)
class _Process:
    """What one orchestrator process runs: its settings, the loop (with its proposer), the MCP
    sessions, the status API's server and the raw capture."""

    settings: OrchestratorSettings
    loop: ExperimentLoop
    sessions: SessionPool
    server: QuietServer
    capture: RawCapture
    alerts: AlertWatcher | None = None

    async def close(self) -> None:
        await self.sessions.close()
        await self.loop.proposer.close()
        await self.loop.runs.db.close()
        self.capture.stop()


async def _host_changed(log: EventLog, process_id: str, endpoint: str, state: str) -> None:
    """One of several SnakeLab hosts stopped or started answering: an event, best effort (a
    database outage must not fail the request that noticed it)."""
    content = (
        SnakeLabHostDown(endpoint=endpoint)
        if state == "down"
        else SnakeLabHostUp(endpoint=endpoint)
    )
    try:
        await log.log(content, process_id=process_id)
    except DatabaseError as exc:
        logger.warning("could not log SnakeLab host %s %s: %s", endpoint, state, exc)


def _wire(settings: OrchestratorSettings, schema: ConfigSchema, proposer_name: str) -> _Process:
    """Open the process's resources and build the loop, the proposer and the API server."""
    process_id = str(uuid.uuid4())
    print(f"ax3l-orchestrator: process id {process_id}", flush=True)
    capture = RawCapture(settings.raw_logs_enabled, settings.output_dir)
    capture.start()
    logger.info("process id %s", process_id)
    db = Database(settings)
    log = EventLog(db)
    snakelab = snakelab_client(
        settings.snakelab_hosts(),
        settings.snakelab_timeout,
        on_change=partial(_host_changed, log, process_id),
    )
    index = ConfigIndex(db, schema)
    status = LoopStatus(
        process_id,
        proposer_name,
        seed_stagnant_rounds=settings.seed_stagnant_rounds,
        promotion=settings.promotion,
        snakelab_hosts=snakelab.states if isinstance(snakelab, SnakeLabHosts) else None,
    )
    poll = settings.snakelab_poll_interval
    runs = Runs(
        db,
        log,
        schema,
        index,
        OnceSubmitter(db, snakelab, index, poll, status),
        RunWaiter(db, log, snakelab, schema, poll, status, settings.run_deadline_seconds),
        baseline_max_attempts=settings.baseline_max_attempts,
        infra_retry_max=settings.infra_retry_max,
    )
    sessions = SessionPool(partial(bound_session, settings=settings), settings.mcp_prepared_ahead)
    deps = ProposerDeps(db, log, schema, status, capture, index, sessions, RunModels(db, schema))
    proposer = make_proposer(proposer_name, deps, settings)
    server = QuietServer(
        uvicorn.Config(
            create_app(ApiResources(db, snakelab, status), settings.allowed_hosts),
            host=settings.http_host,
            port=settings.orchestrator_port,
            log_level="warning",
            lifespan="off",
        )
    )
    loop = ExperimentLoop(settings, runs, snakelab, status, process_id, proposer)
    notifier = notifier_from(settings)
    alerts = None
    if notifier is not None:
        alerts = AlertWatcher(
            Alerts(db, log, notifier, settings.reports_link()),
            db,
            process_id,
            settings.alert_poll_interval,
            settings.stall_factor,
            # A turn waiting for a proposal (a seat's, a model's) is no stall.
            waiting=lambda: status.phase == Phase.CONVERSING,
        )
    return _Process(settings, loop, sessions, server, capture, alerts)


async def run(settings: OrchestratorSettings, schema: ConfigSchema, proposer_name: str) -> int:
    """Run the loop and the API until a signal (0) or a fatal error (1)."""
    process = _wire(settings, schema, proposer_name)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await process.loop.proposer.start()
    except (OSError, ValueError) as exc:  # ValueError: the seats' endpoint without its login
        print(f"ax3l-orchestrator: {exc}", file=sys.stderr, flush=True)
        await process.close()
        return 2
    return await _supervise(process, stop)


async def _supervise(process: _Process, stop: asyncio.Event) -> int:
    """Serve the API and run the experiment until a signal or until either of them ends;
    then stop both and close everything. The exit code."""
    status = process.loop.status
    api = asyncio.create_task(process.server.serve(), name="status-api")
    experiment = asyncio.create_task(_experiment(process.settings, process.loop), name="experiment")
    stopper = asyncio.create_task(stop.wait(), name="stop-signal")
    watcher = process.alerts
    alerting = asyncio.create_task(watcher.run(), name="alerts") if watcher else None
    reason = "stopped by a signal (SIGINT or SIGTERM)"
    try:
        done, _ = await asyncio.wait(
            {api, experiment, stopper}, return_when=asyncio.FIRST_COMPLETED
        )
        if experiment in done:
            code = _loop_ended(experiment.exception(), status)
            reason = status.stop_reason or "the loop ended"
            return code
        if api in done:
            reason = "the status API stopped"
            print(
                f"ax3l-orchestrator: the status API stopped (is port"
                f" {process.settings.orchestrator_port} in use?)",
                file=sys.stderr,
                flush=True,
            )
            return 1
        return 0
    finally:
        status.set_phase(Phase.STOPPED)
        for task in (experiment, stopper, alerting):
            if task is not None:
                await stop_task(task)
        if watcher is not None:
            await watcher.loop_stopped(reason)
        process.server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, SystemExit, Exception):
            await api
        await process.close()


def _loop_ended(error: BaseException | None, status: LoopStatus) -> int:
    """The exit code once the experiment ended: 0 without an error, 2 for a database no wait
    can fix, else 1; the error is the loop's stop reason and is said on stderr."""
    if error is None:
        return 0
    status.stop_reason = str(error)
    print(f"ax3l-orchestrator: stopped: {error}", file=sys.stderr, flush=True)
    if isinstance(error, DatabaseUnavailable):
        print(
            "ax3l-orchestrator: database errors stop the loop; started again, the"
            " orchestrator waits for the database and continues where the events"
            " say",
            file=sys.stderr,
            flush=True,
        )
    return 2 if isinstance(error, DatabaseMisconfigured) else 1


async def _startup(settings: OrchestratorSettings, loop: ExperimentLoop) -> None:
    """Check the schema and prepare, waiting out a database that is not there (yet)."""
    outage, pause = loop.runs.db.outage, settings.db_wait_max

    async def check_schema() -> None:
        summary = await asyncio.to_thread(ensure_schema, settings)
        print(f"ax3l-orchestrator: {summary}", flush=True)

    await wait_for_database(check_schema, outage, pause_max=pause)
    name, poll = settings.snakelab_db_name, settings.snakelab_poll_interval

    async def ready() -> None:
        # Startup writes too (adopting lost submissions): a full disk shows as in the loop.
        try:
            await prepare(loop.runs, loop.snakelab, loop.status, name, poll)
        finally:
            loop.status.disk_full = loop.runs.db.disk_full.describe()

    await wait_for_database(ready, outage, pause_max=pause)


async def _experiment(settings: OrchestratorSettings, loop: ExperimentLoop) -> None:
    try:
        await _startup(settings, loop)
        await loop.run()
    except FATAL as exc:
        logger.error("the loop stopped: %s", exc)
        raise


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("httpx", "httpcore", "mcp", "optuna"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        arm(armed_points())
        settings, proposer_name, note = configure(args, OrchestratorSettings())
        if (misfit := settle_does_not_fit(settings)) is not None:
            raise ConfigurationError(misfit)
        schema = load_schema(settings.schema_path)
        notifier_from(settings)
    except (
        ConfigurationError,
        UnknownCrashPoint,
        SchemaFileError,
        NotifyUrlsInvalid,
        ValueError,
    ) as exc:
        print(f"ax3l-orchestrator: {exc}", file=sys.stderr)
        return 2
    print(f"ax3l-orchestrator: {note}", flush=True)
    if args.output and not settings.raw_logs_enabled:
        print(
            "ax3l-orchestrator: raw capture is off (AX3L_RAW_LOGS_ENABLED); --output is unused",
            flush=True,
        )
    return asyncio.run(run(settings, schema, proposer_name))


if __name__ == "__main__":
    sys.exit(main())
