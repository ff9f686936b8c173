"""Who may reach the seats' endpoint, checked in this order before any MCP message is read:

1. the ``Host`` and ``Origin`` headers (``seat_limits.HostCheck``; 421 / 403), whatever the
   bind address;
2. the bearer token, looked up in the seats' in-memory copy (``SeatDirectory``: a revoke takes
   effect within ``AX3L_SEAT_TOKEN_REFRESH`` seconds). A request without an active seat's token
   draws on the strangers' buckets (``seat_limits.Buckets``: its client address's, an IPv6
   address by its /64, and the one all strangers share; 429 with ``Retry-After``), the address
   from a proxy header only behind a trusted proxy, and then gets 401. The token is read first
   so that no flood of strangers, from however many addresses, can empty a seat's bucket: a
   seat's requests draw on its own bucket only (429 when it is empty);
3. a seat that was already told it is over ``AX3L_SEAT_RATE_LIMIT`` gets 429 until its
   window frees (``seat_blocked``), and one with ``MAX_IN_FLIGHT`` requests being served gets
   429 for another.

Only ``POST`` is served (405 for any other method, before the token is read): the endpoint is
stateless and answers in JSON, so it needs nothing else, and a ``GET`` would open a
server-sent-event stream that never ends and holds one of the ``AX3L_SEATS_MAX_CONNECTIONS``
slots. Every request a seat makes draws on its bucket, whatever it asks, and each has an
overall deadline (``deadline``): past it the request gets 504 and its slot is free again.

A refused request writes nothing to the database: it is counted by reason
(``RefusalCounter``) and logged at most every few seconds per reason with the client address.
The seat admitted is ``CURRENT_SEAT`` for the whole handling of its request; no event or log
line ever holds a token. A database that cannot be read for the tokens gets a 503 that says
only that (its error goes to the log, never to a client without a token).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ax3l.orchestrator.seat_limits import (
    Buckets,
    HostCheck,
    Network,
    RefusalCounter,
    client_address,
)
from ax3l.orchestrator.seats import SeatDirectory
from ax3l.shared.db.errors import DatabaseError

logger = logging.getLogger(__name__)

# The seat making the current request (set by ``SeatAuth`` for the request's whole handling).
CURRENT_SEAT: contextvars.ContextVar[str | None] = contextvars.ContextVar("ax3l_seat", default=None)
# Its client address (the peer, or the trusted proxy's X-Forwarded-For).
CURRENT_ADDRESS: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ax3l_seat_address", default=None
)
# A loopback-only path with the counters (Prometheus text), for the operator.
METRICS_PATH = "/metrics"
_LOOPBACK_PEERS = ("127.0.0.1", "::1")
_FORWARD_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")
# Requests of one seat served at once; one more gets 429.
MAX_IN_FLIGHT = 4


class SeatAuth:
    """ASGI middleware: only requests with an allowed Host and Origin, within the rate limits,
    with an active seat's bearer token reach the MCP app."""

    def __init__(
        self,
        app: ASGIApp,
        seats: SeatDirectory,
        hosts: HostCheck,
        buckets: Buckets,
        trusted: list[Network],
        refusals: RefusalCounter,
        metrics: Callable[[], str] | None = None,
        seat_blocked: Callable[[str], float | None] | None = None,
        deadline: float = 60.0,
    ):
        self.app = app
        self.seats = seats
        self.hosts = hosts
        self.buckets = buckets
        self.trusted = trusted
        self.refusals = refusals
        self.metrics = metrics
        self.seat_blocked = seat_blocked
        self.deadline = deadline
        self.in_flight: Counter[str] = Counter()
        self.answered = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a websocket: nothing here speaks it
            return
        self.answered += 1
        headers = Headers(scope=scope)
        client = scope.get("client")
        peer = str(client[0]) if client else None
        address = client_address(peer, headers.get("x-forwarded-for"), self.trusted)
        if not self.hosts.host_allowed(headers.get("host")):
            await self._deny(send, "wrong_host", address, 421, "this Host is not served here")
            return
        if not self.hosts.origin_allowed(headers.get("origin")):
            await self._deny(send, "wrong_origin", address, 403, "this Origin is not allowed")
            return
        if (
            scope.get("path") == METRICS_PATH
            and self.metrics is not None
            and peer in _LOOPBACK_PEERS
            and not any(name in headers for name in _FORWARD_HEADERS)
        ):
            await text_response(send, 200, self.metrics())
            return
        if scope.get("method") != "POST":
            await self._deny(
                send, "wrong_method", address, 405, "only POST is served", headers={"allow": "POST"}
            )
            return
        seat = await self._seat(headers, address, send)
        if seat is None:
            return
        if self.in_flight[seat] >= MAX_IN_FLIGHT:
            await self._deny(
                send,
                "in_flight",
                f"{address} (seat {seat})",
                429,
                f"seat {seat} has {MAX_IN_FLIGHT} requests being served; wait for their answers",
                error="too_many_requests",
                wait=1,
            )
            return
        self.in_flight[seat] += 1
        seat_reset = CURRENT_SEAT.set(seat)
        address_reset = CURRENT_ADDRESS.set(address)
        try:
            await self._within_deadline(scope, receive, send, f"{address} (seat {seat})")
        finally:
            CURRENT_SEAT.reset(seat_reset)
            CURRENT_ADDRESS.reset(address_reset)
            self.in_flight[seat] -= 1
            if not self.in_flight[seat]:
                del self.in_flight[seat]

    async def _within_deadline(self, scope: Scope, receive: Receive, send: Send, who: str) -> None:
        """The MCP app on the request, cut at ``deadline`` seconds: 504 when nothing was
        answered yet (else the connection is closed mid-answer)."""
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            async with asyncio.timeout(self.deadline):
                await self.app(scope, receive, sending)
        except TimeoutError:
            self.refusals.count("deadline", who)
            if not started:
                text = f"the request took longer than {self.deadline:g} s"
                await json_response(send, 504, {"error": "deadline", "error_description": text})

    async def _seat(self, headers: Headers, address: str, send: Send) -> str | None:
        """The active seat whose bearer token the request carries, within its own rate; else
        None, the refusal sent. Without an active seat's token the strangers' buckets are
        charged (429) before the 401."""
        scheme, _, token = headers.get("authorization", "").partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        verdict = None
        if token:
            try:
                verdict = await self.seats.verify(token)
            except DatabaseError as exc:
                logger.warning("seat endpoint: cannot read the seats: %s", exc)
                wait = self.buckets.admit_stranger(address)
                if wait is not None:
                    await self._deny(
                        send, "too_many_requests", address, 429, "slow down", wait=wait
                    )
                else:
                    await self._deny(send, "unavailable", address, 503, "try again later", wait=5)
                return None
        if verdict is None or verdict.seat is None or not verdict.allowed:
            wait = self.buckets.admit_stranger(address)
            if wait is not None:
                await self._deny(send, "too_many_requests", address, 429, "slow down", wait=wait)
            elif verdict is None:
                await self._unauthorized(
                    send, "no_token", address, "send Authorization: Bearer <token>"
                )
            elif verdict.seat is None:
                await self._unauthorized(
                    send, "unknown_token", address, "this token belongs to no seat"
                )
            else:
                await self._unauthorized(
                    send,
                    "revoked",
                    address,
                    f"seat {verdict.seat.name!r} was revoked; ask for a new token",
                )
            return None
        seat = verdict.seat.name
        who = f"{address} (seat {seat})"
        wait = self.buckets.admit_seat(seat)
        if wait is not None:
            await self._deny(send, "seat_too_many_requests", who, 429, "slow down", wait=wait)
            return None
        wait = self.seat_blocked(seat) if self.seat_blocked else None
        if wait is not None:
            await self._deny(
                send,
                "rate_limited",
                who,
                429,
                f"seat {seat} is over AX3L_SEAT_RATE_LIMIT",
                error="too_many_requests",
                wait=wait,
            )
            return None
        return seat

    async def _deny(
        self,
        send: Send,
        reason: str,
        who: str,
        status: int,
        text: str,
        error: str | None = None,
        wait: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Count the refusal under ``reason`` and answer ``{"error": error or reason,
        "error_description": text}``, with ``Retry-After`` (whole seconds, at least 1) when
        the client should ``wait``."""
        self.refusals.count(reason, who)
        # A refused client keeps no connection open: every slot is one of the served's.
        headers = {**(headers or {}), "connection": "close"}
        if wait is not None:
            headers["retry-after"] = str(max(1, math.ceil(wait)))
        body = {"error": error or reason, "error_description": text}
        await json_response(send, status, body, headers)

    async def _unauthorized(self, send: Send, reason: str, address: str, message: str) -> None:
        challenge = f'Bearer error="invalid_token", error_description="{message}"'
        text = f"Ax3l refused the request: {message}"
        headers = {"www-authenticate": challenge}
        await self._deny(send, reason, address, 401, text, "invalid_token", headers=headers)


async def json_response(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    await _respond(send, status, json.dumps(body).encode(), "application/json", headers)


async def text_response(send: Send, status: int, text: str) -> None:
    await _respond(send, status, text.encode(), "text/plain; version=0.0.4", None)


async def _respond(
    send: Send, status: int, raw: bytes, content_type: str, headers: dict[str, str] | None
) -> None:
    head = [(b"content-type", content_type.encode()), (b"content-length", str(len(raw)).encode())]
    head += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": raw})
