"""``snakelab-server``: the reference SnakeLab's process (control socket, worker, database).

Startup: connect to SnakeLab's database (waiting for it a while), create the tables, mark
every run an earlier process left unfinished as failed (with ``--host-id``, only this host's:
another host's runs in a shared database are left alone), start the worker thread, bind the
control REP socket and the events PUB socket. SIGTERM/SIGINT stop it: queued runs and the
running one are stored as failed ("Server stopped before run completed"), as the next
startup would do anyway.

Server-side failures (the database went away while storing a submission) have no error code
in the contract; they answer ``invalid_request`` with a message starting ``server error:``.
A database outage never stops the server (``db_outages.py``); a refused login or privilege
does, with exit code 1 and a message saying what to fix.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

import zmq

from ax3l.shared.config_schema import ConfigSchema, SchemaFileError, load_schema
from ax3l.shared.db.errors import DatabaseError
from snakelab.control_methods import ControlMethods
from snakelab.ended_events import EndedEvents
from snakelab.envelope import Refusal, RequestRefused, error_reply, ok_reply, read_request
from snakelab.run_store import STOPPED_MESSAGE, DbSettings, RunStore
from snakelab.runs import RunBook
from snakelab.trainers.base import Trainer
from snakelab.version import PROJECT_VERSION
from snakelab.worker import Worker

log = logging.getLogger("snakelab")

TRAINERS = ("drqn", "surrogate")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# Transport guard: ZeroMQ drops (without a reply) messages above this; anything between the
# application limit and this gets an invalid_request reply.
TRANSPORT_LIMIT_FACTOR = 16
POLL_MILLISECONDS = 200
# The control thread and the store writer wait on sockets and need the GIL back quickly from
# the CPU-bound trainer thread; at Python's default 5 ms hand-over every request and every
# database round trip made while a run trains would wait up to 5 ms more.
GIL_SWITCH_SECONDS = 0.001
WORKER_STOP_SECONDS = 30.0


@dataclass(frozen=True)
class ServerOptions:
    address: str
    port: int
    events_port: int
    trainer: str
    surrogate_seconds: float
    schema_path: str | None
    max_message_bytes: int
    db_wait_seconds: float
    log_level: str
    host_id: str = ""

    @property
    def control_endpoint(self) -> str:
        return f"tcp://{self.address}:{self.port}"

    @property
    def events_endpoint(self) -> str | None:
        return None if self.events_port == 0 else f"tcp://{self.address}:{self.events_port}"


def _env_type(
    kind: Callable[[str], Any], what: str, low: float, high: float | None = None
) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value < low or (high is not None and value > high):
            bounds = f"at least {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"{text!r} must be {bounds}")
        return value

    return convert


def parse_options(argv: Sequence[str] | None, env: Mapping[str, str]) -> ServerOptions:
    """Flags, with defaults from the environment (flags win)."""
    parser = argparse.ArgumentParser(
        prog="snakelab-server",
        description="Reference SnakeLab: the control contract, tables and trainers.",
    )
    port = _env_type(int, "a port number", 0, 65535)
    seconds = _env_type(float, "a number of seconds", 0.0)

    def option(flag: str, variable: str, default: str, text: str, **kwargs: Any) -> None:
        """A flag whose default is the environment variable's value, else ``default``."""
        help_text = f"{text} (env {variable}; {default})"
        parser.add_argument(flag, default=env.get(variable, default), help=help_text, **kwargs)

    option("--address", "SNAKELAB_ADDRESS", "127.0.0.1", "interface to bind, e.g. 127.0.0.1 or *")
    option("--port", "SNAKELAB_PORT", "41970", "control socket port", type=port)
    option(
        "--events-port", "SNAKELAB_EVENTS_PORT", "41972", "events PUB port, 0 to disable", type=port
    )
    option("--trainer", "SNAKELAB_TRAINER", "drqn", "training algorithm", choices=TRAINERS)
    option(
        "--surrogate-seconds",
        "SNAKELAB_SURROGATE_SECONDS",
        "0",
        "wall time of one surrogate run",
        type=seconds,
    )
    parser.add_argument(
        "--schema",
        dest="schema_path",
        metavar="SCHEMA",
        default=env.get("SNAKELAB_SCHEMA_PATH") or None,
        help="config schema file (env SNAKELAB_SCHEMA_PATH; the bundled schema)",
    )
    option(
        "--max-message-bytes",
        "SNAKELAB_MAX_MESSAGE_BYTES",
        "262144",
        "largest request accepted",
        type=_env_type(int, "a byte count", 1024),
    )
    option(
        "--db-wait",
        "SNAKELAB_DB_WAIT_SECONDS",
        "30",
        "how long to wait for the database at startup",
        type=seconds,
        dest="db_wait_seconds",
        metavar="DB_WAIT",
    )
    option("--log-level", "SNAKELAB_LOG_LEVEL", "INFO", "log level on stderr", choices=LOG_LEVELS)
    option(
        "--host-id",
        "SNAKELAB_HOST_ID",
        "",
        "this host's name in simulation_runs.host, for several hosts sharing one database: a"
        " restart then fails only its own unfinished runs; empty: the only host (a restart"
        " fails every unfinished run)",
    )
    args = parser.parse_args(argv)
    args.log_level = args.log_level.upper()
    # Defaults from the environment skip `choices`: check them here.
    if args.trainer not in TRAINERS:
        parser.error(f"SNAKELAB_TRAINER must be one of {', '.join(TRAINERS)}")
    if args.log_level not in LOG_LEVELS:
        parser.error(f"SNAKELAB_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}")
    # Each flag's destination is the option of that name.
    names = [field.name for field in dataclasses.fields(ServerOptions)]
    return ServerOptions(**{name: getattr(args, name) for name in names})


def make_trainer(name: str, surrogate_seconds: float) -> Trainer:
    """The trainer called ``name`` (imported here: drqn pulls in the network code)."""
    if name == "surrogate":
        from snakelab.trainers.surrogate import SurrogateTrainer

        return SurrogateTrainer(surrogate_seconds)
    from snakelab.trainers.drqn import DrqnTrainer

    return DrqnTrainer()


class ControlServer:
    """The REP loop: one request in, one JSON object out, until asked to stop."""

    def __init__(
        self,
        options: ServerOptions,
        schema: ConfigSchema,
        store: RunStore,
        trainer: Trainer,
    ):
        self.options = options
        self.store = store
        self.book = RunBook()
        self.context: zmq.Context[Any] = zmq.Context()
        self.events = (
            EndedEvents(self.context, options.events_endpoint)
            if options.events_endpoint is not None
            else None
        )
        self.methods = ControlMethods(
            self.book, store, schema, self.events.publish if self.events else None
        )
        self.worker = Worker(
            self.book, store, trainer, self.events.hand_off if self.events else None
        )
        self.stopping = False
        self.control = self.context.socket(zmq.REP)
        self.control.setsockopt(zmq.LINGER, 0)
        self.control.setsockopt(zmq.MAXMSGSIZE, options.max_message_bytes * TRANSPORT_LIMIT_FACTOR)

    def handle(self, frames: list[bytes]) -> bytes:
        """The reply to one request message; never raises."""
        try:
            request = read_request(frames, self.options.max_message_bytes)
        except Exception as exc:  # whatever a hostile message finds, the server stays up
            log.exception("reading a request failed")
            return error_reply(None, RequestRefused("invalid_request", f"server error: {exc!r}"))
        if isinstance(request, Refusal):
            return error_reply(request.request_id, request.error)
        try:
            return ok_reply(
                request.request_id, self.methods.dispatch(request.method, request.payload)
            )
        except RequestRefused as exc:
            return error_reply(request.request_id, exc)
        except DatabaseError as exc:
            log.error("%s failed: %s", request.method, exc)
            refusal = RequestRefused("invalid_request", f"server error: {exc}")
            return error_reply(request.request_id, refusal)
        except Exception as exc:
            log.exception("%s failed", request.method)
            refusal = RequestRefused("invalid_request", f"server error: {exc!r}")
            return error_reply(request.request_id, refusal)

    def serve(self) -> None:
        """Bind, start the worker and answer requests until ``stop()``."""
        self.control.bind(self.options.control_endpoint)
        self.worker.start()
        poller = zmq.Poller()
        poller.register(self.control, zmq.POLLIN)
        if self.events is not None:
            poller.register(self.events.inbox, zmq.POLLIN)
        log.info(
            "SnakeLab %s listening on %s (trainer %s, events %s)",
            PROJECT_VERSION,
            self.options.control_endpoint,
            self.worker.trainer.name,
            self.options.events_endpoint or "off",
        )
        while not self.stopping and self.store.refused is None:
            ready = dict(poller.poll(POLL_MILLISECONDS))
            if self.control in ready:
                frames = self.control.recv_multipart()
                self.control.send(self.handle(frames))
            if self.events is not None and self.events.inbox in ready:
                self.events.drain()

    def stop(self) -> None:
        self.stopping = True

    def close(self) -> None:
        """Store unfinished runs as failed, stop the worker, close sockets and connections."""
        abandoned = self.book.close()
        self.store.stop_waiting()
        try:
            self.store.fail_runs([run.run_id for run in abandoned], STOPPED_MESSAGE)
        except DatabaseError as exc:
            log.error("queued runs not marked failed (the next start will): %s", exc)
        if self.worker.is_alive():
            self.worker.join(WORKER_STOP_SECONDS)
        if self.worker.is_alive():
            # Its sockets and connection are still in use: leave them to the process exit.
            log.warning("the running run did not stop in time; the next start fails it")
            self.control.close(linger=0)
            return
        if self.events is not None:
            self.events.drain()
            self.events.close()
        self.control.close(linger=0)
        self.context.term()
        self.store.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``snakelab-server`` and ``python -m snakelab``."""
    options = parse_options(argv, os.environ)
    logging.basicConfig(
        level=options.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        schema = load_schema(options.schema_path)
        db_settings = DbSettings.from_env(os.environ)
    except (SchemaFileError, ValueError) as exc:
        log.error("%s", exc)
        return 2
    store = RunStore(db_settings, PROJECT_VERSION, options.host_id)
    try:
        store.wait_until_reachable(options.db_wait_seconds)
        store.create_tables()
        store.add_host_column()
        failed = store.fail_unfinished(STOPPED_MESSAGE)
    except DatabaseError as exc:
        log.error("cannot use SnakeLab's database %s: %s", db_settings.describe(), exc)
        store.close()
        return 1
    if failed:
        log.info("marked %d unfinished run(s) of an earlier process as failed", failed)

    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    trainer = make_trainer(options.trainer, options.surrogate_seconds)
    server = ControlServer(options, schema, store, trainer)

    def request_stop(signum: int, frame: FrameType | None) -> None:
        server.stop()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        server.serve()
    except zmq.ZMQError as exc:
        log.error("control socket %s: %s", options.control_endpoint, exc)
        return 1
    finally:
        server.close()
    if store.refused is not None:
        log.error("stopping: SnakeLab's database %s: %s", db_settings.describe(), store.refused)
        return 1
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
