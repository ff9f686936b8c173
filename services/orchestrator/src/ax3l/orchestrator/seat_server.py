"""The seats' endpoint: a Streamable HTTP MCP server where outside agents take open turns.

It serves while the proposer is ``external``, because the orchestrator is the one that opens
a turn (writes its checkpoint) and waits for its proposal: the open turn is handed over on a
``seat_turns.TurnBoard``, in memory or, with the endpoint in a process of its own
(``seat_process``, the default), over a local socket, so the endpoint never guesses which turn
is open. Authentication (``seat_auth``) and rate limits (``seat_limits``) have modules of their own;
the two submit tools are the stdio server's, typed once (``register_submit_tools``). It
holds only what it needs: the seats' hashes (``SeatDirectory``), read access for the turn's
history (and open values, when the orchestrator did not send the turn's payload), the tool
channel to the broker, and the event log. It never talks to
SnakeLab and never decides a proposal: a submission is forwarded to the broker as the very
envelope the stdio MCP tool sends, so validation, duplicates, turn integrity, submission and
their events are exactly the local path's.

Every HTTP request passes ``SeatAuth`` first: an allowed Host and Origin, then
``Authorization: Bearer <seat token>`` against the seats' in-memory copy, and the request rate
of the seat, or (no active seat's token) of strangers by address and together. A refused
request is counted and sampled into the log, never written to the database, so a flood of
strangers costs no write and at most one read per ``AX3L_SEAT_TOKEN_REFRESH`` seconds.

What a seat costs is bounded too. Only POST is served (405 otherwise: a GET's event stream
would never end), a seat has at most ``seat_auth.MAX_IN_FLIGHT`` requests being served, every
one of its requests draws on its own rate bucket, and each has an overall deadline
(``request_deadline``). Arguments are typed exactly (``history``'s entry is one of
the entry names) and a request body is at most ``MAX_BODY`` bytes. A seat may make
``AX3L_SEAT_RATE_LIMIT`` tool calls a minute; calls beyond it are tool errors that are counted,
not logged as events. A ``current_turn`` poll is an event only the first time a seat sees an
open turn (``seat_call`` with ``open`` true); every other poll is counted. The turn's payload
and each entry's history are built once per turn and then served from memory. A seat's other
calls are ``seat_call`` or ``seat_call_refused`` events naming the seat, never its token.
``AX3L_SEAT_TURN_SHARE`` caps the share of recent turns one seat may win, and a seat that loses
a turn is not told who won it. The counters are at ``/metrics`` for loopback clients only.
"""

import asyncio
import contextlib
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult
from starlette.types import ASGIApp

from ax3l.app.snakelab.tools.binding import Binding
from ax3l.app.snakelab.tools.descriptions import pair_description, single_description
from ax3l.app.snakelab.tools.forwarding import tool_result
from ax3l.app.snakelab.tools.server import SubmitTexts, register_submit_tools
from ax3l.orchestrator.comparable_history import load_history
from ax3l.orchestrator.open_values import open_values
from ax3l.orchestrator.seat_auth import CURRENT_ADDRESS, CURRENT_SEAT, SeatAuth
from ax3l.orchestrator.seat_limits import (
    Buckets,
    HostCheck,
    RateLimiter,
    RefusalCounter,
    parse_networks,
)
from ax3l.orchestrator.seat_turns import OpenTurn, TurnBoard
from ax3l.orchestrator.seats import SeatDirectory
from ax3l.shared import registry
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.db.reads import current_golden
from ax3l.shared.event_models import GoldenConfigCreated, SeatCall, SeatCallRefused
from ax3l.shared.registry import Entry, EntryKind, EntryName
from ax3l.shared.settings import SeatsServiceSettings
from ax3l.shared.tool_channel import ToolChannelError, ZMQClient, client_endpoint
from ax3l.shared.wire import payload_for

logger = logging.getLogger(__name__)

SERVER_NAME = "ax3l-seats"
MCP_PATH = "/mcp"
INSTRUCTIONS = (
    "Ax3l tunes the hyperparameters of a Snake-playing DQN in a fixed round robin, one single"
    " parameter or parameter pair per turn. Call current_turn() to see whether a turn is open,"
    " what it asks for, its prompt, rules and open values; history(entry) for the comparable"
    " runs; then submit_single_value(value) or submit_pair_values(value_1, value_2) for the"
    " open turn's entry. Ax3l validates, refuses repeats and starts the SnakeLab run; the first"
    " accepted submission of any seat wins the turn."
)


SUBMIT_TEXTS = SubmitTexts(
    single="Submit one value for the open turn's single parameter. The result is Ax3l's JSON"
    ' reply: {"status": "ok", "run_id"} or {"status": "rejected", "code", "reason", "prompt"};'
    " a rejection leaves the turn open.",
    pair="Submit two values for the open turn's parameter pair (epsilon_pair: initial, decay;"
    " reward_pair: closer_to_food, further_from_food). Ax3l's JSON reply as for"
    " submit_single_value.",
    value="The proposed value of the open turn's single parameter, a JSON number.",
    value_1="The open pair's first value (see current_turn: value_1), a JSON number.",
    value_2="The open pair's second value (see current_turn: value_2), a JSON number.",
)
TOOL_NAMES: dict[EntryKind, str] = {entry.kind: entry.tool_name for entry in registry.ENTRIES}
# The largest request body read (a tool call is a few hundred bytes).
MAX_BODY = 64 * 1024
# The turns a seat's share (AX3L_SEAT_TURN_SHARE) is counted over.
SHARE_WINDOW = 10
# Seconds a history served while no turn is open stays cached.
IDLE_HISTORY_SECONDS = 10.0
SeatEvent = SeatCall | SeatCallRefused
# The events the seats' endpoint writes, by name: the only ones it may have written.
SEAT_EVENTS: dict[str, type[SeatEvent]] = {
    model.event: model for model in (SeatCall, SeatCallRefused)
}


@dataclass(frozen=True)
class SeatReads:
    """What the endpoint may read: the seats, the turn's history and open values."""

    db: Database
    schema: ConfigSchema
    index: ConfigIndex
    seats: SeatDirectory


@dataclass(eq=False)
class SeatEndpoint:
    """The seats' MCP server: its tools, its HTTP app and its lifetime."""

    reads: SeatReads
    log: EventLog
    settings: SeatsServiceSettings
    board: TurnBoard
    limiter: RateLimiter = field(init=False)
    buckets: Buckets = field(init=False)
    hosts: HostCheck = field(init=False)
    refusals: RefusalCounter = field(init=False)
    client: ZMQClient = field(init=False)
    mcp: MCPServer = field(init=False)
    calls: Counter[str] = field(default_factory=Counter, init=False)
    _seen: set[tuple[int, str]] = field(default_factory=set, init=False)
    _turn_payload: tuple[OpenTurn, dict[str, Any]] | None = field(default=None, init=False)
    _histories: dict[tuple[str, Any], tuple[float, dict[str, Any]]] = field(
        default_factory=dict, init=False
    )
    _auth: SeatAuth | None = field(default=None, init=False)
    _told: set[str] = field(default_factory=set, init=False)
    _server: uvicorn.Server | None = field(default=None, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    # Where a history asked for while no turn is open gets its golden configuration: read from
    # the events (inside the orchestrator), or the last one the orchestrator sent (apart: the
    # endpoint's own database user may not read events).
    read_golden: bool = True
    idle_golden: GoldenConfigCreated | None = None
    # Apart from the orchestrator, the endpoint writes no event itself: each goes to the
    # orchestrator (``seat_process``), which writes it. Inside, None: the endpoint writes.
    forward: Callable[[SeatEvent, str | None], None] | None = None

    def __post_init__(self) -> None:
        settings = self.settings
        self.limiter = RateLimiter(settings.seat_rate_limit)
        self.buckets = Buckets(settings.seats_rate_global, settings.seats_rate_per_address)
        self.hosts = HostCheck.from_setting(settings.seats_allowed_hosts)
        self.trusted = parse_networks(settings.seats_trusted_proxies)
        self.refusals = RefusalCounter()
        self.reads.seats.refresh = settings.seat_token_refresh
        self.client = ZMQClient(client_endpoint(settings), timeout=settings.zmq_timeout)
        self.mcp = self._build()

    # -- events ---------------------------------------------------------------------------

    async def _event(
        self,
        model: type[SeatCall | SeatCallRefused],
        seat: str | None,
        content: dict[str, Any],
        level: str | None = None,
    ) -> None:
        turn = self.board.turn
        if turn is not None:
            content.setdefault("checkpoint_event_id", turn.checkpoint_event_id)
        content.setdefault("client", CURRENT_ADDRESS.get())
        event = model.model_validate({"seat": seat, **content})
        if self.forward is not None:
            self.forward(event, level)
            return
        await self.log.log(event, **seat_event_fields(event, turn, level))

    async def _refuse(self, seat: str, tool: str, reason: str, message: str, **facts: Any) -> None:
        """Log a refused tool call and raise the tool error the seat reads."""
        await self._event(
            SeatCallRefused, seat, {"tool": tool, "reason": reason, "message": message, **facts}
        )
        raise ToolError(message)

    async def _admit(self, tool: str) -> str:
        seat = CURRENT_SEAT.get()
        if seat is None:  # only reachable without SeatAuth in front
            raise ToolError("no seat: send Authorization: Bearer <seat token>")
        wait = self.limiter.admit(seat)
        if wait is not None:
            # Counted, never an event: a seat beyond its limit costs no write; its next
            # requests are refused at the door until its window frees.
            self._told.add(seat)
            self.refusals.count("rate_limited", f"{CURRENT_ADDRESS.get()} (seat {seat})")
            limit = self.settings.seat_rate_limit
            raise ToolError(
                f"seat {seat} made {limit} calls in the last minute, the most allowed"
                f" (AX3L_SEAT_RATE_LIMIT); try again in {math.ceil(wait)} s"
            )
        self.calls[tool] += 1
        return seat

    # -- tools ----------------------------------------------------------------------------

    def _build(self) -> MCPServer:
        mcp = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

        @mcp.tool()
        async def current_turn() -> dict[str, Any]:
            """The open turn: its entry, the prompt Ax3l's own model would get, the rules, the
            open values and the seconds left; ``open`` is false when no turn is offered."""
            seat = await self._admit("current_turn")
            return await self.current_turn(seat)

        @mcp.tool()
        async def history(entry: EntryName) -> dict[str, Any]:
            """The comparable history of a round-robin entry (hidden_size, sequence_length,
            batch_size, learning_rate, gamma, epsilon_pair, reward_pair) as JSON: per tested
            value its current-seed runs and earlier-seed high scores, all other settings equal
            to the golden configuration."""
            seat = await self._admit("history")
            return await self.history(seat, entry)

        async def submit(kind: EntryKind, values: dict[str, int | float]) -> CallToolResult:
            seat = await self._admit(TOOL_NAMES[kind])
            return await self.submit(seat, kind, values)

        register_submit_tools(mcp, SUBMIT_TEXTS, submit)
        return mcp

    async def current_turn(self, seat: str) -> dict[str, Any]:
        turn = self.board.turn
        if turn is None or turn.run_id is not None:
            self.calls["current_turn_closed"] += 1  # a poll: counted, not an event
            return {
                "open": False,
                "message": "No turn is open for the seats right now (the experiment is seeding,"
                " waiting for a run, comparing, or the turn was just taken). Ask again later.",
            }
        body = await self._turn_body(turn)
        seen = (turn.checkpoint_event_id, seat)
        if seen not in self._seen:  # the seat's first sight of this turn is an event
            if len(self._seen) > 10_000:
                self._seen.clear()
            self._seen.add(seen)
            await self._event(
                SeatCall,
                seat,
                {
                    "tool": "current_turn",
                    "open": True,
                    "checkpoint_event_id": turn.checkpoint_event_id,
                    "seconds_since_turn_opened": round(turn.age(), 3),
                },
            )
        return {**body, "seconds_left": round(turn.remaining(), 3)}

    async def _turn_body(self, turn: OpenTurn) -> dict[str, Any]:
        """The open turn's payload, built once per turn (``seconds_left`` apart), or as the
        orchestrator built it when the endpoint runs apart."""
        if turn.payload is not None:
            return turn.payload
        cached = self._turn_payload
        if cached is not None and cached[0] is turn:
            return cached[1]
        body = await turn_payload(self.reads.schema, self.reads.index, turn)
        self._turn_payload = (turn, body)
        return body

    async def history(self, seat: str, name: str) -> dict[str, Any]:
        entry = registry.BY_NAME.get(name)
        if entry is None:  # only reachable past the tool's type check
            await self._refuse(
                seat,
                "history",
                "unknown_entry",
                f"not a round-robin entry; choose one of {', '.join(registry.PARAMETER_ORDER)}",
            )
        assert entry is not None
        body = await self._history_body(seat, entry)
        await self._event(SeatCall, seat, {"tool": "history", "entry": entry.name})
        return body

    async def _history_body(self, seat: str, entry: Entry) -> dict[str, Any]:
        """An entry's history, built once per turn (while no turn is open, at most every
        ``IDLE_HISTORY_SECONDS``)."""
        turn = self.board.turn
        key: tuple[str, Any] = (entry.name, turn.checkpoint_event_id if turn else None)
        now = time.monotonic()
        cached = self._histories.get(key)
        if cached is not None and (turn is not None or now - cached[0] < IDLE_HISTORY_SECONDS):
            return cached[1]
        golden = turn.golden if turn is not None else self.idle_golden
        if golden is None and self.read_golden:
            found = await current_golden(self.reads.db)
            golden = found[1] if found is not None else None
        if golden is None:
            await self._refuse(seat, "history", "no_golden", "there is no golden configuration yet")
        assert golden is not None
        found_history = await load_history(self.reads.db, self.reads.schema, entry, golden.config)
        body = {
            "entry": entry.name,
            "settings": list(entry.paths),
            "golden_run_id": golden.run_id,
            "golden_high_score": golden.high_score,
            "seed": golden.seed,
            "golden_values": list(found_history.golden_values),
            "history": found_history.report(),
        }
        # Only the current turn's (or the idle) histories are kept.
        self._histories = {k: v for k, v in self._histories.items() if k[1] == key[1]}
        self._histories[key] = (now, body)
        return body

    async def submit(self, seat: str, kind: EntryKind, values: dict[str, Any]) -> CallToolResult:
        tool = TOOL_NAMES[kind]
        async with self.board.lock:
            turn = self.board.turn
            refused = self._refusal(seat, kind, tool, turn)
            if refused is not None:
                await self._refuse(seat, tool, *refused, values=values)
            assert turn is not None
            return await self._forward(seat, tool, turn, values)

    def _refusal(
        self, seat: str, kind: EntryKind, tool: str, turn: OpenTurn | None
    ) -> tuple[str, str] | None:
        """Why the open turn refuses ``seat``'s ``tool`` call (reason, message), or None."""
        if turn is None:
            return "no_turn", (
                "no turn is open for the seats right now; call current_turn() and submit"
                " while it says open"
            )
        entry = turn.entry
        if turn.run_id is not None:
            # The winner is not named to other seats.
            taker = f"by you (run {turn.run_id})" if turn.winner == seat else "by another seat"
            return "turn_taken", (
                f"the turn for {entry.name} was already taken {taker}; wait for the next turn"
            )
        if entry.kind != kind:
            right = f"{entry.tool_name}({', '.join(entry.value_names)})"
            return "wrong_kind", (
                f"the open turn is the {entry.kind} {entry.name}: submit it with {right},"
                f" not {tool}"
            )
        share = self.settings.seat_turn_share
        won = self.board.won_recently(seat, SHARE_WINDOW)
        allowed = max(1, math.floor(share * SHARE_WINDOW))
        if share < 1 and won >= allowed:
            return "over_share", (
                f"seat {seat} won {won} of the last {SHARE_WINDOW} turns, its share"
                f" (AX3L_SEAT_TURN_SHARE={share:g}); this turn is left to other seats"
            )
        return None

    async def _forward(
        self, seat: str, tool: str, turn: OpenTurn, values: dict[str, Any]
    ) -> CallToolResult:
        facts = {
            "tool": tool,
            "values": values,
            "checkpoint_event_id": turn.checkpoint_event_id,
            "seconds_since_turn_opened": round(turn.age(), 3),
        }
        try:
            reply = await self.client.call(tool, payload_for(turn.entry, values))
        except ToolChannelError as exc:
            await self._event(
                SeatCall, seat, {**facts, "outcome": "not_delivered", "error": str(exc)}, "ERROR"
            )
            # The proposer still finds a proposal the broker accepted in the events.
            turn.answered.set()
            raise ToolError(f"{tool} could not reach Ax3l: {exc}") from None
        status = reply.get("status")
        if status == "ok" and isinstance(reply.get("run_id"), str):
            turn.winner, turn.run_id = seat, str(reply["run_id"])
            outcome: dict[str, Any] = {"outcome": "accepted", "run_id": turn.run_id}
        elif status == "rejected":
            outcome = {
                "outcome": "rejected",
                "code": reply.get("code"),
                "reason": reply.get("reason"),
            }
        else:
            error = reply.get("error")
            outcome = {"outcome": "error", "error": error}
        await self._event(
            SeatCall, seat, {**facts, **outcome}, "WARNING" if status != "ok" else None
        )
        if turn.run_id is not None:
            turn.answered.set()
        return tool_result(reply)

    # -- lifetime -------------------------------------------------------------------------

    def app(self) -> ASGIApp:
        """The HTTP app: the MCP endpoint at /mcp behind the seat check."""
        inner = self.mcp.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            host=self.settings.seats_host,
            max_request_body_size=MAX_BODY,
            # The SDK's own check too, whatever the bind address (SeatAuth checks first).
            transport_security=TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=self.hosts.allowed_hosts(),
                allowed_origins=self.hosts.allowed_origins(),
            ),
        )
        self._auth = SeatAuth(
            inner,
            self.reads.seats,
            self.hosts,
            self.buckets,
            self.trusted,
            self.refusals,
            self.metrics,
            self._seat_blocked,
            deadline=request_deadline(self.settings),
        )
        return self._auth

    def _seat_blocked(self, seat: str) -> float | None:
        """Seconds a seat already told it is over its rate limit must still wait (None: it may
        call again)."""
        if seat not in self._told:
            return None
        wait = self.limiter.peek(seat)
        if wait is None:
            self._told.discard(seat)
        return wait

    def metrics(self) -> str:
        """The endpoint's counters in Prometheus' text format."""
        lines = [
            "# TYPE ax3l_seat_requests_total counter",
            f"ax3l_seat_requests_total {self._auth.answered if self._auth else 0}",
            "# TYPE ax3l_seat_refused_total counter",
        ]
        lines += [
            f'ax3l_seat_refused_total{{reason="{reason}"}} {count}'
            for reason, count in sorted(self.refusals.counts.items())
        ]
        lines.append("# TYPE ax3l_seat_calls_total counter")
        lines += [
            f'ax3l_seat_calls_total{{tool="{tool}"}} {count}'
            for tool, count in sorted(self.calls.items())
        ]
        return "\n".join(lines) + "\n"

    async def start(self) -> None:
        """Listen on ``AX3L_SEATS_HOST``:``AX3L_SEATS_PORT`` until ``stop``."""
        config = uvicorn.Config(
            self.app(),
            host=self.settings.seats_host,
            port=self.settings.seats_port,
            log_level="warning",
            lifespan="on",
            limit_concurrency=self.settings.seats_max_connections,
            # The client address is SeatAuth's (AX3L_SEATS_TRUSTED_PROXIES), not uvicorn's.
            proxy_headers=False,
            server_header=False,
        )
        self._server = QuietServer(config)
        self._task = asyncio.create_task(self._server.serve(), name="seat-endpoint")
        while not self._server.started:
            if self._task.done():
                error = self._task.exception()
                raise OSError(
                    f"the seat endpoint could not listen on {self.settings.seats_host}:"
                    f"{self.settings.seats_port}: {error or 'it stopped'}"
                )
            await asyncio.sleep(0.02)
        logger.info("seat endpoint on http://%s:%s%s", config.host, config.port, MCP_PATH)
        if config.host not in ("127.0.0.1", "::1", "localhost") and not self.trusted:
            # Nothing here bounds how long or how large a request's headers may be: a proxy
            # that buffers them must sit in front (docs/security.md, L1).
            logger.warning(
                "seat endpoint: listening on %s with no AX3L_SEATS_TRUSTED_PROXIES: put it"
                " behind a reverse proxy that buffers requests (docs/agents.md, TLS), and name"
                " that proxy",
                config.host,
            )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, SystemExit, Exception):
                await asyncio.wait_for(self._task, 10)


def seat_event_fields(event: SeatEvent, turn: OpenTurn | None, level: str | None) -> dict[str, Any]:
    """The columns of a seat's event: named by its seat, hung on the open turn's conversation
    (``turn``, when the event is of that turn)."""
    return {
        "level": level,
        "process_id": turn.conversation_id if turn else None,
        "parent_event_id": turn.started_event_id if turn else None,
        "source_name": event.seat,
        "parameter": turn.entry.name if turn else None,
    }


def request_deadline(settings: SeatsServiceSettings) -> float:
    """A seat's request's overall deadline: a submission forwarded to the broker may wait for
    another seat's to be answered first, so two tool-channel timeouts, and 10 s more."""
    return 2 * settings.zmq_timeout + 10


async def turn_payload(schema: ConfigSchema, index: ConfigIndex, turn: OpenTurn) -> dict[str, Any]:
    """What ``current_turn`` answers for an open turn (``seconds_left`` apart)."""
    entry = turn.entry
    tested = await index.existing_values(entry, turn.golden.config)
    values = open_values(schema, entry, tested)
    rules = turn_rules(schema, entry)
    for rule in rules:
        rule["golden_value"] = schema.get(turn.golden.config, rule["setting"])
    binding = Binding(entry, entry.name)
    describe = single_description if entry.kind == "single" else pair_description
    prompt = "\n\n".join(p.text for p in turn.prompts) + f"\n\n{values.describe()}"
    return {
        "open": True,
        "entry": entry.name,
        "kind": entry.kind,
        "index": turn.index,
        "checkpoint_event_id": turn.checkpoint_event_id,
        "tool": entry.tool_name,
        "arguments": list(entry.value_names),
        "tool_description": describe(binding, schema),
        "rules": rules,
        "golden": {
            "run_id": turn.golden.run_id,
            "high_score": turn.golden.high_score,
            "seed": turn.golden.seed,
        },
        "open_values": {
            "finite": values.finite,
            "text": values.describe(),
            "choices": None if values.choices is None else [list(c) for c in values.choices],
        },
        "prompt": prompt,
        "prompts": [{"source_name": p.source_name, "text": p.text} for p in turn.prompts],
    }


def turn_rules(schema: ConfigSchema, entry: Entry) -> list[dict[str, Any]]:
    """Each argument's rules: in words (``rules``, as the model reads them) and as data
    (``type``, ``minimum``, ``maximum``, ``multiple_of``, ``const``, ``unit``), so an agent
    needs no parsing; ``golden_value`` is filled in per turn."""
    return [
        {
            "argument": argument,
            "setting": path,
            "description": schema.by_path[path].description,
            "rules": schema.by_path[path].rules_text(),
            **schema.by_path[path].constraints(),
            "golden_value": None,
        }
        for argument, path in zip(entry.value_names, entry.paths, strict=True)
    ]


class QuietServer(uvicorn.Server):
    """A uvicorn server that leaves SIGINT/SIGTERM alone: the orchestrator's ``run`` owns them,
    so the loop, the status API and the seats' endpoint stop together."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield
