"""``ax3l-toolbroker``: the tool listener (ZeroMQ) and its REST API in one process.

The listener binds ``--zmq-endpoint``, else ``AX3L_ZMQ_ENDPOINT``, else the zmq binding in
Ax3l's config file, else tcp://127.0.0.1:61970. REST listens on ``AX3L_HTTP_HOST`` and
``AX3L_TOOLBROKER_PORT`` (28872). At startup pending submission intents are reconciled, so a
run a crashed broker left behind is adopted before anything new is submitted.

A database outage is waited out in place: the listener and REST keep answering (tool requests
get a clear tool error, ``/ready`` is 503 with "waiting for the database since ..."), the schema
check and reconciliation are retried with backoff until the database answers. Only errors no
wait can fix (credentials, privileges, schema version) stop the broker (exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Iterator

import uvicorn
import zmq.asyncio
from fastapi import FastAPI

from ax3l.shared.config_schema import ConfigSchema, SchemaFileError, cached_schema
from ax3l.shared.crash_points import UnknownCrashPoint, arm, armed_points
from ax3l.shared.db import intents
from ax3l.shared.db.availability import wait_for_database
from ax3l.shared.db.cli import ensure_schema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError, DatabaseMisconfigured, DatabaseUnavailable
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.settings import ToolbrokerSettings
from ax3l.shared.snakelab_hosts import snakelab_client
from ax3l.shared.tasks import stop_task
from ax3l.shared.tool_channel import listen_endpoint, settle_does_not_fit
from ax3l.toolbroker.api import create_app
from ax3l.toolbroker.deps import BrokerResources
from ax3l.toolbroker.handlers import SubmitHandler
from ax3l.toolbroker.listener import ToolListener
from ax3l.toolbroker.status import BrokerStatus
from ax3l.toolbroker.submission import SubmissionWorkflow
from ax3l.toolbroker.tool_handler import ToolHandler

logger = logging.getLogger("ax3l.toolbroker")


class Broker:
    """The assembled broker: database, index, SnakeLab client, handlers and listener."""

    def __init__(
        self,
        settings: ToolbrokerSettings,
        endpoint: str | None = None,
        schema: ConfigSchema | None = None,
        context: zmq.asyncio.Context | None = None,
    ):
        self.settings = settings
        self.schema = schema or cached_schema(settings.schema_file())
        self.db = Database(settings)
        self.log = EventLog(self.db)
        self.index = ConfigIndex(self.db, self.schema)
        # Several hosts (AX3L_SNAKELAB_ENDPOINTS): the orchestrator logs their changes.
        self.snakelab = snakelab_client(
            settings.snakelab_hosts(), settings.snakelab_timeout, context=context
        )
        self.status = BrokerStatus(endpoint=listen_endpoint(settings, endpoint))
        workflow = SubmissionWorkflow(
            self.db,
            self.log,
            self.schema,
            self.index,
            self.snakelab,
            settle_wait=settings.submit_settle_wait,
        )
        handlers = [SubmitHandler(self.schema, workflow, kind) for kind in ("single", "pair")]
        self.handler = ToolHandler(
            self.log,
            {handler.method: handler for handler in handlers},
            self.status,
            settings.zmq_max_message_bytes,
        )
        self.listener = ToolListener(
            self.status.endpoint,
            self.handler.handle,
            settings.zmq_max_message_bytes,
            context=context,
        )

    async def start(self, reconcile: bool = True) -> str:
        """Reconcile pending intents and bind the tool endpoint; returns the bound endpoint."""
        if reconcile:
            try:
                await self.reconcile()
            except DatabaseError as exc:
                # Submissions reconcile again first, so a database that is down now is no risk.
                logger.warning("startup reconciliation skipped: %s", exc)
        self.status.endpoint = self.listener.bind()
        return self.status.endpoint

    async def reconcile(self) -> None:
        adopted = await intents.reconcile(self.db, self.schema, self.log, index=self.index)
        if adopted:
            logger.warning("adopted runs of interrupted submissions: %s", ", ".join(adopted))

    async def wait_for_database(self) -> None:
        """Check the schema and reconcile once the database answers, with backoff meanwhile.

        Returns when both are done; raises ``DatabaseMisconfigured`` when no wait can help.
        """
        pause = self.settings.db_wait_max
        while True:
            try:
                summary = await wait_for_database(
                    lambda: asyncio.to_thread(ensure_schema, self.settings),
                    self.db.outage,
                    pause_max=pause,
                )
                logger.info("the database answers: %s", summary)
                await wait_for_database(self.reconcile, self.db.outage, pause_max=pause)
                return
            except DatabaseMisconfigured:
                raise
            except DatabaseError as exc:
                logger.warning("database check failed (%s); retrying in %g s", exc, pause)
                await asyncio.sleep(pause)

    async def serve(self) -> None:
        await self.listener.serve()

    def app(self) -> FastAPI:
        resources = BrokerResources(self.db, self.snakelab, self.status)
        return create_app(resources, self.settings.allowed_hosts)

    async def close(self) -> None:
        self.listener.close()
        await self.db.close()


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # ``run`` owns SIGINT/SIGTERM so that the listener stops together with the API.
        yield


async def _check_tables(settings: ToolbrokerSettings, broker: Broker) -> bool:
    """Whether Ax3l's tables were checked; False when the database cannot tell now (the broker
    then waits for it). A misconfigured database raises ``DatabaseMisconfigured``."""
    try:
        await asyncio.to_thread(ensure_schema, settings)
    except DatabaseMisconfigured:
        raise
    except DatabaseError as exc:
        logger.warning("could not check Ax3l's tables now (%s); waiting for the database", exc)
        if isinstance(exc, DatabaseUnavailable):
            broker.db.outage.begin(exc)
        return False
    return True


async def run(settings: ToolbrokerSettings, endpoint: str | None, host: str, port: int) -> int:
    misfit = settle_does_not_fit(settings)
    if misfit is not None:
        print(f"ax3l-toolbroker: {misfit}", file=sys.stderr)
        return 2
    try:
        broker = Broker(settings, endpoint)
        database_ready = await _check_tables(settings, broker)
    except (SchemaFileError, DatabaseMisconfigured) as exc:
        print(f"ax3l-toolbroker: {exc}", file=sys.stderr)
        return 2
    try:
        bound = await broker.start(reconcile=database_ready)
    except OSError as exc:
        print(f"ax3l-toolbroker: {exc}", file=sys.stderr)
        await broker.close()
        return 1
    server = _Server(
        uvicorn.Config(broker.app(), host=host, port=port, log_level="warning", lifespan="off")
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, setattr, server, "should_exit", True)
    listener = asyncio.create_task(broker.serve(), name="tool-listener")
    api = asyncio.create_task(server.serve(), name="rest-api")
    running = {listener, api}
    waiter: asyncio.Task[None] | None = None
    if not database_ready:
        waiter = asyncio.create_task(broker.wait_for_database(), name="database-wait")
        running.add(waiter)
    logger.info("listening on %s; REST on http://%s:%d", bound, host, port)
    try:
        while True:
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            if waiter in done and waiter.exception() is None:
                running.discard(waiter)
                continue
            break
    finally:
        server.should_exit = True
        await stop_task(listener)
        if waiter is not None:
            await stop_task(waiter)
        with contextlib.suppress(asyncio.CancelledError):
            await api
        await broker.close()
    if waiter is not None and waiter in done and waiter.exception() is not None:
        print(f"ax3l-toolbroker: {waiter.exception()}", file=sys.stderr)
        return 2
    if listener in done and listener.exception() is not None:
        logger.error("the tool listener stopped: %s", listener.exception())
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ax3l-toolbroker",
        description="Ax3l's tool listener: validates, deduplicates and submits SnakeLab runs.",
    )
    parser.add_argument(
        "--zmq-endpoint",
        help="endpoint to listen on (default: AX3L_ZMQ_ENDPOINT, the config file's zmq"
        " binding, tcp://127.0.0.1:61970)",
    )
    parser.add_argument("--host", help="REST host (default AX3L_HTTP_HOST)")
    parser.add_argument("--port", type=int, help="REST port (default AX3L_TOOLBROKER_PORT)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        arm(armed_points())
    except UnknownCrashPoint as exc:
        print(f"ax3l-toolbroker: {exc}", file=sys.stderr)
        return 2
    settings = ToolbrokerSettings()
    host = args.host or settings.http_host
    port = args.port if args.port is not None else settings.toolbroker_port
    return asyncio.run(run(settings, args.zmq_endpoint, host, port))


if __name__ == "__main__":
    sys.exit(main())
