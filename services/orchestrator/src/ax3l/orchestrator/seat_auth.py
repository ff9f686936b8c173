"""Who may reach the seats' endpoint: only requests with an active seat's bearer token.

Anything else is refused with 401 (logged as ``seat_call_refused`` through the endpoint's
callback) before any MCP message is read. The seat admitted is ``CURRENT_SEAT`` for the whole
handling of its request; no event or log line ever holds a token.
"""

import contextvars
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ax3l.orchestrator.seats import SeatDirectory
from ax3l.shared.db.errors import DatabaseError

logger = logging.getLogger(__name__)

# The seat making the current request (set by ``SeatAuth`` for the request's whole handling).
CURRENT_SEAT: contextvars.ContextVar[str | None] = contextvars.ContextVar("ax3l_seat", default=None)


class SeatAuth:
    """ASGI middleware: only requests with an active seat's bearer token reach the MCP app."""

    def __init__(
        self,
        app: ASGIApp,
        seats: SeatDirectory,
        refused: Callable[[str, str | None, dict[str, Any]], Awaitable[None]],
    ):
        self.app = app
        self.seats = seats
        self.refused = refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization", "")
        scheme, _, token = header.partition(" ")
        facts = {"http_method": scope.get("method"), "path": scope.get("path")}
        if scheme.lower() != "bearer" or not token.strip():
            await self._deny(send, "no_token", None, facts, "send Authorization: Bearer <token>")
            return
        try:
            verdict = await self.seats.verify(token.strip())
        except DatabaseError as exc:
            await json_response(send, 503, {"error": "unavailable", "error_description": str(exc)})
            return
        if verdict.seat is None:
            await self._deny(send, "unknown_token", None, facts, "this token belongs to no seat")
            return
        if not verdict.allowed:
            await self._deny(
                send,
                "revoked",
                verdict.seat.name,
                facts,
                f"seat {verdict.seat.name!r} was revoked; ask for a new token",
            )
            return
        reset = CURRENT_SEAT.set(verdict.seat.name)
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT_SEAT.reset(reset)

    async def _deny(
        self, send: Send, reason: str, seat: str | None, facts: dict[str, Any], message: str
    ) -> None:
        try:
            await self.refused(reason, seat, facts)
        except DatabaseError:
            logger.warning("could not log a refused seat request (%s)", reason)
        await json_response(
            send,
            401,
            {"error": "invalid_token", "error_description": f"Ax3l refused the request: {message}"},
            {"www-authenticate": f'Bearer error="invalid_token", error_description="{message}"'},
        )


async def json_response(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    raw = json.dumps(body).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    head += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": raw})
