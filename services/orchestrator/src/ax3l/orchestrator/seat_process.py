"""The seats' endpoint in a process of its own (``AX3L_SEATS_PROCESS``, on by default).

A flood at ``/mcp`` then costs the endpoint's process its CPU and event loop, never the
loop's: the orchestrator's process only keeps the turn board. Two ways to run it:

* the orchestrator's child (no ``AX3L_SEATS_BOARD_SOCKET``: an ``ax3l-orchestrator`` started
  by hand, the tests' stack): started by the orchestrator at a lower CPU priority (``NICE``
  more), so on a busy machine the loop is served first; the two share the board over a socket
  pair (no address, no port: the child inherits its end);
* a service of its own (compose's ``seats``, and ``make run``'s with the proposer external:
  ``python -m ax3l.orchestrator.seat_process serve``, the stack spec's ``seats`` service), with
  ``AX3L_SEATS_BOARD_SOCKET`` set on both sides: the endpoint listens on that unix socket (mode
  0600, on a volume only the two containers share, or in make run's ``<run dir>/seats``,
  0700) and the orchestrator connects to it, waiting up to ``START_TIMEOUT`` at its start and
  ``RECONNECT_WAIT`` when a turn opens after the endpoint went away. The endpoint's settings
  are then its own environment's (its password a ``*_FILE`` secret in compose): the
  orchestrator sends only JSON, never settings, and does not hold the endpoint's password. A
  new connection replaces the last.

Either way one JSON message a line:

* orchestrator -> endpoint: first the settings (the child only) and the golden
  configuration as it is, then
  ``{"op": "open", "turn": {...}}`` (the turn: entry, checkpoint, golden, prompts, deadline,
  and ``payload``, what ``current_turn`` answers: built here when the turn opens, because its
  open values refresh Ax3l's config index, a write the endpoint may not make) and
  ``{"op": "close", "checkpoint_event_id": N}``;
* endpoint -> orchestrator: ``{"ready": true}`` once it listens (or ``{"error": ...}``),
  ``{"answered": N}`` when a seat's submission for turn N was accepted (a wake-up: the
  proposer reads the answer from the events, as always), ``{"closed": N, "winner": ...,
  "run_id": ...}`` once a close has waited for a submission being forwarded, and
  ``{"event": name, "content": {...}, "level": ...}``, a seat's event for the orchestrator to
  write (``EventRelay``).

The settings reach the child pickled over the socket pair (never on a command line or in its
environment; never over the unix socket of the service form). The endpoint opens a database
pool of its own with its own login, ``AX3L_SEATS_DB_USER`` (``ax3l-db grant-seats``: SELECT
on ``seats`` and SnakeLab's tables, nothing more; unset, it logs a warning and uses Ax3l's).
So it reads no events: a history asked for while no turn is open is relative to the golden
configuration the orchestrator last sent (at the start, and with each turn). And it writes
none: the endpoint is the part of Ax3l that parses the internet's requests, and the loop
trusts the events (a turn's answer is its ``proposal_accepted``, the golden its
``golden_config_created``), so the endpoint's own events (``seat_call``,
``seat_call_refused``) go to the orchestrator over the socket, which writes them after
checking that they are of those two kinds and valid, at most ``EVENTS_PER_MINUTE``, hung on
its own open turn only when they name its checkpoint. Events of a service endpoint without an
orchestrator wait for the next (at most ``EVENTS_BUFFERED``).

The child exits when its socket closes (the orchestrator stopped, or died); an endpoint that
died is started again when the next turn opens (a service: restarted by compose or make run's
supervisor, reconnected then).

    python -m ax3l.orchestrator.seat_process CONTROL_FD
    python -m ax3l.orchestrator.seat_process serve
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import json
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from ax3l.orchestrator.prompts import Prompt
from ax3l.orchestrator.seat_limits import RateLimiter, RefusalCounter
from ax3l.orchestrator.seat_server import (
    SEAT_EVENTS,
    SeatEndpoint,
    SeatEvent,
    SeatReads,
    seat_event_fields,
)
from ax3l.orchestrator.seat_turns import OpenTurn, TurnBoard
from ax3l.orchestrator.seats import SeatDirectory
from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.shared.registry import BY_NAME
from ax3l.shared.settings import SeatsServiceSettings
from ax3l.shared.stack.spec import process_env

logger = logging.getLogger(__name__)

MODULE = "ax3l.orchestrator.seat_process"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
START_TIMEOUT = 60.0
CLOSE_TIMEOUT = 30.0
# Seconds a turn's opening waits for an endpoint service that went away to answer again.
RECONNECT_WAIT = 5.0
LINE_LIMIT = 16 * 1024 * 1024
# Seat events the orchestrator writes for the endpoint in any minute (a seat makes at most
# AX3L_SEAT_RATE_LIMIT calls a minute), and those an endpoint keeps while no orchestrator is
# connected; more are dropped and counted.
EVENTS_PER_MINUTE = 3000
EVENTS_BUFFERED = 1000
LEVELS = (None, "INFO", "WARNING", "ERROR")
# How much nicer than the orchestrator the endpoint's process runs.
NICE = 10

# What current_turn answers for a turn (built on the orchestrator's side), and the golden
# configuration as it is now (None before seeding).
PayloadBuilder = Callable[[OpenTurn], Awaitable[dict[str, Any]]]
GoldenReader = Callable[[], Awaitable[GoldenConfigCreated | None]]


def endpoint_login(settings: SeatsServiceSettings) -> SeatsServiceSettings:
    """The endpoint's settings alone (none of the orchestrator's: no alert or model URL, no
    loop setting) with its own database login (``AX3L_SEATS_DB_USER``), or with Ax3l's when none
    is configured (a warning: Ax3l's own login has every grant on its database; refused when the
    endpoint listens beyond loopback, where the internet may reach it)."""
    own = {name: getattr(settings, name) for name in SeatsServiceSettings.model_fields}
    if settings.seats_db_user:
        own |= {"db_user": settings.seats_db_user, "db_password": settings.seats_db_password}
    elif settings.seats_host not in LOOPBACK:
        raise ValueError(
            f"AX3L_SEATS_HOST={settings.seats_host} is reachable from other machines: set"
            " AX3L_SEATS_DB_USER and AX3L_SEATS_DB_PASSWORD (ax3l-db grant-seats), so the"
            " endpoint does not serve them with Ax3l's own database login"
        )
    else:
        logger.warning(
            "no AX3L_SEATS_DB_USER: the seats' endpoint uses Ax3l's own database login"
            " (see ax3l-db grant-seats)"
        )
    return SeatsServiceSettings.model_construct(**own)  # validated once, as ``settings``


def turn_message(turn: OpenTurn) -> dict[str, Any]:
    return {
        "entry": turn.entry.name,
        "index": turn.index,
        "checkpoint_event_id": turn.checkpoint_event_id,
        "conversation_id": turn.conversation_id,
        "started_event_id": turn.started_event_id,
        "golden": turn.golden.model_dump(mode="json"),
        "prompts": [[p.source_name, p.text, p.role] for p in turn.prompts],
        "deadline_seconds": turn.deadline_seconds,
        "age": turn.age(),
        "payload": turn.payload,
    }


def turn_from_message(message: dict[str, Any]) -> OpenTurn:
    return OpenTurn(
        entry=BY_NAME[message["entry"]],
        index=int(message["index"]),
        checkpoint_event_id=int(message["checkpoint_event_id"]),
        conversation_id=str(message["conversation_id"]),
        started_event_id=int(message["started_event_id"]),
        golden=GoldenConfigCreated.model_validate(message["golden"]),
        prompts=[Prompt(*p) for p in message["prompts"]],
        deadline_seconds=float(message["deadline_seconds"]),
        opened_at=time.monotonic() - float(message["age"]),
        payload=message["payload"],
    )


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode() + b"\n"


# -- the orchestrator's side ----------------------------------------------------------------


class RemoteBoard(TurnBoard):
    """The orchestrator's turn board when the endpoint runs apart: each open and close is
    sent to the endpoint's process, whose answers wake the proposer."""

    def __init__(self, process: SeatProcess):
        super().__init__()
        self.process = process
        self._opening: asyncio.Task[None] | None = None

    def open(self, turn: OpenTurn) -> None:
        super().open(turn)
        self._opening = asyncio.create_task(self._publish(turn), name="seat-turn-open")

    async def _publish(self, turn: OpenTurn) -> None:
        try:
            if turn.payload is None:
                turn.payload = await self.process.payload(turn)
            await self.process.send({"op": "open", "turn": turn_message(turn)})
        except Exception:  # the seats will not see this turn; the deadline still holds
            logger.exception("could not offer the turn to the seats' endpoint")

    async def close(self, turn: OpenTurn) -> None:
        opening, self._opening = self._opening, None
        if opening is not None:
            with contextlib.suppress(Exception):
                await opening
        closed = await self.process.close_turn(turn.checkpoint_event_id)
        if closed is not None:
            turn.winner = closed.get("winner")
            run_id = closed.get("run_id")
            turn.run_id = str(run_id) if run_id is not None else None
        await super().close(turn)


class SeatProcess:
    """Starts, feeds and stops the endpoint's process; ``board`` is the proposer's board.

    ``payload`` builds what ``current_turn`` answers for a turn and ``golden`` reads the golden
    configuration, both with the orchestrator's database access; ``log`` writes the seats'
    events the endpoint sends."""

    def __init__(
        self,
        settings: SeatsServiceSettings,
        payload: PayloadBuilder,
        golden: GoldenReader | None = None,
        *,
        log: EventLog,
    ):
        self.settings = settings
        self.payload = payload
        self.golden = golden
        self.log = log
        self.events = RateLimiter(EVENTS_PER_MINUTE)
        self.dropped = RefusalCounter()
        self.board = RemoteBoard(self)
        self.process: asyncio.subprocess.Process | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._closing: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._lock = asyncio.Lock()
        self._stopping = False

    async def start(self) -> None:
        async with self._lock:
            await self._start(START_TIMEOUT)

    async def _start(self, wait: float = RECONNECT_WAIT) -> None:
        if self.settings.seats_board_socket:
            await self._connect(self.settings.seats_board_socket, wait)
            return
        # The child gets what it needs and no more: no environment but the process's basics
        # (none of Ax3l's passwords or alert URLs), and the endpoint's settings alone, with its
        # own login in place of Ax3l's.
        mine = endpoint_login(self.settings)
        ours, theirs = socket.socketpair()
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                MODULE,
                str(theirs.fileno()),
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env=process_env(os.environ),
            )
        finally:
            theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=ours, limit=LINE_LIMIT)
        settings = base64.b64encode(pickle.dumps(mine)).decode()
        await self._hello(reader, writer, {"settings": settings})

    async def _connect(self, path: str, wait: float) -> None:
        """The endpoint as a service of its own: connect to its board socket, waiting for it
        at most ``wait`` seconds (it may be starting too)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(path, limit=LINE_LIMIT)
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise OSError(
                        f"the seats' endpoint does not answer at AX3L_SEATS_BOARD_SOCKET={path}"
                        f" ({exc}); is its service running (compose: --profile seats)?"
                    ) from None
                await asyncio.sleep(0.5)
        await self._hello(reader, writer, {})

    async def _hello(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: dict[str, Any]
    ) -> None:
        golden = None
        if self.golden is not None:
            try:
                golden = await self.golden()
            except Exception:  # the next turn brings it; a history meanwhile says no golden
                logger.exception("could not read the golden configuration for the seats")
        first["golden"] = None if golden is None else golden.model_dump(mode="json")
        writer.write(_line(first))
        await writer.drain()
        try:
            async with asyncio.timeout(START_TIMEOUT):
                ready = json.loads(await reader.readline() or b"{}")
        except (TimeoutError, ValueError) as exc:
            ready = {"error": f"no answer ({exc or 'timeout'})"}
        if not ready.get("ready"):
            writer.close()
            await self._reap()
            raise OSError(f"the seats' endpoint did not start: {ready.get('error', ready)}")
        self._writer = writer
        self._reader_task = asyncio.create_task(
            self._read(reader, writer), name="seat-endpoint-reader"
        )

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    await self._take(json.loads(line))
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    self.dropped.count("malformed", f"{type(exc).__name__}: {exc}"[:200])
        except (OSError, ValueError) as exc:  # ValueError: a line over LINE_LIMIT
            logger.warning("the seats' endpoint's socket: %s", exc)
        if not self._stopping:
            logger.error("the seats' endpoint process exited; it is started again next turn")
        writer.close()
        if self._writer is writer:
            self._writer = None
        for future in self._closing.values():
            if not future.done():
                future.set_result({})
        self._closing.clear()

    async def _take(self, message: dict[str, Any]) -> None:
        """One message of the endpoint's (see the module)."""
        if "answered" in message:
            turn = self.board.turn
            if turn is not None and turn.checkpoint_event_id == message["answered"]:
                turn.answered.set()
        elif "closed" in message:
            future = self._closing.pop(int(message["closed"]), None)
            if future is not None and not future.done():
                future.set_result(message)
        elif "event" in message:
            await self._write_event(message)

    async def _write_event(self, message: dict[str, Any]) -> None:
        """A seat's event the endpoint sent, written when it is one of the endpoint's own kinds
        and valid, within ``EVENTS_PER_MINUTE``; hung on the open turn only when it names the
        turn's checkpoint. Anything else is dropped and counted, never written."""
        model = SEAT_EVENTS.get(str(message["event"]))
        level = message.get("level")
        if model is None or level not in LEVELS:
            self.dropped.count("not_a_seat_event", str(message["event"])[:100])
            return
        try:
            event = model.model_validate(message.get("content"))
        except ValidationError:
            self.dropped.count("invalid_seat_event", model.event)
            return
        if self.events.admit("events") is not None:
            self.dropped.count("too_many_seat_events", model.event)
            return
        turn = self.board.turn
        if turn is not None and turn.checkpoint_event_id != event.checkpoint_event_id:
            turn = None
        try:
            await self.log.log(event, **seat_event_fields(event, turn, level))
        except DatabaseError as exc:  # the loop meets the outage itself; the reader goes on
            self.dropped.count("seat_event_unwritten", f"{model.event}: {exc}"[:200])

    async def send(self, message: dict[str, Any]) -> None:
        async with self._lock:
            if self._writer is None and not self._stopping:
                await self._reap()
                await self._start()
            if self._writer is None:
                raise OSError("the seats' endpoint is not running")
            self._writer.write(_line(message))
            await self._writer.drain()

    async def close_turn(self, checkpoint_event_id: int) -> dict[str, Any] | None:
        """Close the turn at the endpoint; its winner and run, or None (no endpoint)."""
        if self._writer is None:
            return None
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._closing[checkpoint_event_id] = future
        try:
            await self.send({"op": "close", "checkpoint_event_id": checkpoint_event_id})
            async with asyncio.timeout(CLOSE_TIMEOUT):
                return await future
        except (OSError, TimeoutError):
            self._closing.pop(checkpoint_event_id, None)
            return None

    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def stop(self) -> None:
        self._stopping = True
        if self._writer is not None:
            with contextlib.suppress(OSError):
                self._writer.write_eof()
        if self._reader_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader_task, 15)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        await self._reap()

    async def _reap(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        try:
            await asyncio.wait_for(process.wait(), 15)
        except TimeoutError:
            process.kill()
            await process.wait()


# -- the endpoint's side ----------------------------------------------------------------------


class EventRelay:
    """The endpoint's events, sent to the orchestrator to write (see the module); kept, at most
    ``EVENTS_BUFFERED``, while no orchestrator is connected or it does not read."""

    def __init__(self) -> None:
        self.writer: asyncio.StreamWriter | None = None
        self.waiting: collections.deque[bytes] = collections.deque()
        self.dropped = RefusalCounter()

    def send(self, event: SeatEvent, level: str | None) -> None:
        line = _line({"event": event.event, "content": event.stored(), "level": level})
        writer = self.writer
        if writer is None or writer.is_closing() or _backed_up(writer):
            if len(self.waiting) >= EVENTS_BUFFERED:
                self.waiting.popleft()
                self.dropped.count("seat_events_dropped", "no orchestrator reads them")
            self.waiting.append(line)
            return
        writer.write(line)

    def attach(self, writer: asyncio.StreamWriter) -> None:
        """Send to ``writer`` from now on, the events kept meanwhile first."""
        self.writer = writer
        while self.waiting:
            writer.write(self.waiting.popleft())

    def detach(self, writer: asyncio.StreamWriter) -> None:
        if self.writer is writer:
            self.writer = None


def _backed_up(writer: asyncio.StreamWriter) -> bool:
    return writer.transport.get_write_buffer_size() > LINE_LIMIT


def _golden(value: Any) -> GoldenConfigCreated | None:
    return None if value is None else GoldenConfigCreated.model_validate(value)


async def open_endpoint(
    settings: SeatsServiceSettings, golden: GoldenConfigCreated | None
) -> tuple[Database, SeatEndpoint, EventRelay]:
    """The endpoint listening, on a pool of its own login (``endpoint_login``), its events
    relayed to the orchestrator."""
    db = await Database(endpoint_login(settings)).open()
    relay = EventRelay()
    try:
        schema = cached_schema(settings.schema_file())
        reads = SeatReads(db, schema, ConfigIndex(db, schema), SeatDirectory(db))
        endpoint = SeatEndpoint(
            reads,
            EventLog(db),
            settings,
            TurnBoard(),
            read_golden=False,
            idle_golden=golden,
            forward=relay.send,
        )
        await endpoint.start()
    except BaseException:
        await db.close()
        raise
    return db, endpoint, relay


async def follow(
    endpoint: SeatEndpoint,
    relay: EventRelay,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    """Keep ``endpoint``'s board as the orchestrator at the other end says, and send it the
    seats' events, until it goes."""
    board = endpoint.board
    relay.attach(writer)
    watchers: set[asyncio.Task[None]] = set()
    last: OpenTurn | None = None  # the last turn this orchestrator opened

    async def watch(turn: OpenTurn) -> None:
        while board.turn is turn:
            await turn.answered.wait()
            turn.answered.clear()
            writer.write(_line({"answered": turn.checkpoint_event_id}))
            await writer.drain()

    try:
        while line := await reader.readline():
            message = json.loads(line)
            if message.get("op") == "open":
                turn = turn_from_message(message["turn"])
                endpoint.idle_golden = turn.golden
                board.open(turn)
                last = turn
                task = asyncio.create_task(watch(turn))
                watchers.add(task)
                task.add_done_callback(watchers.discard)
            elif message.get("op") == "close":
                number = int(message["checkpoint_event_id"])
                current = board.turn
                closed: dict[str, Any] = {"closed": number, "winner": None, "run_id": None}
                if current is not None and current.checkpoint_event_id == number:
                    await board.close(current)
                    closed |= {"winner": current.winner, "run_id": current.run_id}
                    current.answered.set()  # ends its watcher
                writer.write(_line(closed))
                await writer.drain()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("the seats' endpoint lost its orchestrator: %s", exc)
    finally:
        relay.detach(writer)
        for task in watchers:
            task.cancel()
        if last is not None and board.turn is last:  # nobody will close it now
            await board.close(last)
        writer.close()


async def serve(control: socket.socket) -> int:
    """The endpoint as the orchestrator's child: its settings come over ``control``."""
    reader, writer = await asyncio.open_unix_connection(sock=control, limit=LINE_LIMIT)
    first = json.loads(await reader.readline() or b"{}")
    settings: SeatsServiceSettings = pickle.loads(base64.b64decode(first["settings"]))
    try:
        db, endpoint, relay = await open_endpoint(settings, _golden(first.get("golden")))
    except Exception as exc:
        writer.write(_line({"error": str(exc)}))
        await writer.drain()
        return 2
    writer.write(_line({"ready": True, "pid": os.getpid()}))
    await writer.drain()
    try:
        await follow(endpoint, relay, reader, writer)
    finally:
        await endpoint.stop()
        await db.close()
    return 0


async def serve_socket(settings: SeatsServiceSettings) -> int:
    """The endpoint as a service of its own (compose's ``seats``): its settings are its
    environment's; the orchestrator connects to ``AX3L_SEATS_BOARD_SOCKET`` (a unix socket, mode
    0600, on a volume only the two share) and keeps the board from there, in plain JSON lines. A
    new connection (the orchestrator restarted) replaces the previous one; until the first, the
    endpoint answers that no turn is open."""
    path = settings.seats_board_socket
    assert path
    try:
        db, endpoint, relay = await open_endpoint(settings, None)
    except Exception as exc:
        print(f"seats endpoint: {exc}", file=sys.stderr)
        return 2
    current: list[asyncio.StreamWriter] = []

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for previous in current:
            previous.close()
        current[:] = [writer]
        try:
            first = json.loads(await reader.readline() or b"{}")
            golden = _golden(first.get("golden"))
        except (ValueError, TypeError) as exc:
            writer.write(_line({"error": f"a malformed first line: {exc}"}))
            writer.close()
            return
        if golden is not None:
            endpoint.idle_golden = golden
        if endpoint.board.turn is not None:
            await endpoint.board.close(endpoint.board.turn)
        writer.write(_line({"ready": True, "pid": os.getpid()}))
        await writer.drain()
        await follow(endpoint, relay, reader, writer)

    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    old = os.umask(0o177)
    try:
        server = await asyncio.start_unix_server(connected, path=path, limit=LINE_LIMIT)
    finally:
        os.umask(old)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    logger.warning("seats endpoint: the turn board at %s", path)
    try:
        await stop.wait()
    finally:
        server.close()
        for writer in current:
            writer.close()
        await endpoint.stop()
        await db.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return 0


USAGE = (
    "usage: python -m ax3l.orchestrator.seat_process CONTROL_FD  (the orchestrator's child)\n"
    "       python -m ax3l.orchestrator.seat_process serve       (on AX3L_SEATS_BOARD_SOCKET)"
)


def run(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if argv == ["serve"]:
        settings = SeatsServiceSettings()
        if not settings.seats_board_socket:
            print(
                "seats endpoint: set AX3L_SEATS_BOARD_SOCKET (a unix socket's path)",
                file=sys.stderr,
            )
            return 2
        return asyncio.run(serve_socket(settings))
    if len(argv) != 1 or not argv[0].isdigit():
        print(USAGE, file=sys.stderr)
        return 2
    # Ctrl-C in a terminal reaches the whole group: the orchestrator stops the endpoint.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(NICE)
    control = socket.socket(fileno=int(argv[0]))
    return asyncio.run(serve(control))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
