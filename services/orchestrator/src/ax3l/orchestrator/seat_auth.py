"""Who may reach the seats' endpoint, checked in this order before any MCP message is read:

1. the ``Host`` and ``Origin`` headers (``seat_limits.HostCheck``; 421 / 403), whatever the
   bind address;
2. the client address's and everyone's request rate (``seat_limits.Buckets``; 429 with
   ``Retry-After``), the address from a proxy header only behind a trusted proxy;
3. an active seat's bearer token (401), looked up in the seats' in-memory copy
   (``SeatDirectory``: a revoke takes effect within ``AX3L_SEAT_TOKEN_REFRESH`` seconds);
4. a seat that was already told it is over ``AX3L_SEAT_RATE_LIMIT`` gets 429 until its
   window frees (``seat_blocked``).

A refused request writes nothing to the database: it is counted by reason
(``RefusalCounter``) and logged at most every few seconds per reason with the client address.
The seat admitted is ``CURRENT_SEAT`` for the whole handling of its request; no event or log
line ever holds a token. A database that cannot be read for the tokens gets a 503 that says
only that (its error goes to the log, never to a client without a token).
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
from collections.abc import Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

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
    ):
        self.app = app
        self.seats = seats
        self.hosts = hosts
        self.buckets = buckets
        self.trusted = trusted
        self.refusals = refusals
        self.metrics = metrics
        self.seat_blocked = seat_blocked
        self.answered = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
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
        wait = self.buckets.admit(address)
        if wait is not None:
            await self._deny(send, "too_many_requests", address, 429, "slow down", wait=wait)
            return
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            await self._unauthorized(
                send, "no_token", address, "send Authorization: Bearer <token>"
            )
            return
        try:
            verdict = await self.seats.verify(token.strip())
        except DatabaseError as exc:
            logger.warning("seat endpoint: cannot read the seats: %s", exc)
            await self._deny(send, "unavailable", address, 503, "try again later", wait=5)
            return
        if verdict.seat is None:
            await self._unauthorized(
                send, "unknown_token", address, "this token belongs to no seat"
            )
            return
        if not verdict.allowed:
            await self._unauthorized(
                send,
                "revoked",
                address,
                f"seat {verdict.seat.name!r} was revoked; ask for a new token",
            )
            return
        wait = self.seat_blocked(verdict.seat.name) if self.seat_blocked else None
        if wait is not None:
            seat = verdict.seat.name
            await self._deny(
                send,
                "rate_limited",
                f"{address} (seat {seat})",
                429,
                f"seat {seat} is over AX3L_SEAT_RATE_LIMIT",
                error="too_many_requests",
                wait=wait,
            )
            return
        seat_reset = CURRENT_SEAT.set(verdict.seat.name)
        address_reset = CURRENT_ADDRESS.set(address)
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT_SEAT.reset(seat_reset)
            CURRENT_ADDRESS.reset(address_reset)

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
        if wait is not None:
            headers = {"retry-after": str(max(1, math.ceil(wait)))}
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
