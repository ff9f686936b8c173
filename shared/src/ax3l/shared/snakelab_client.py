"""Ax3l's client for SnakeLab's control socket (ZeroMQ REQ/REP, the 2.x contract).

One request on a fresh REQ socket (``ax3l.shared.zmq_request``): a request that timed out may
already have been processed, so nothing here ever resends.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import zmq
import zmq.asyncio
from pydantic import ValidationError

from ax3l.shared.wire import (
    ActiveReply,
    ControlError,
    ControlOk,
    HealthReply,
    RunStatus,
    SubmitReply,
)
from ax3l.shared.zmq_request import request_reply


def ping(endpoint: str, timeout: float = 0.5) -> bool:
    """True when a SnakeLab at ``endpoint`` answers ``health`` with ``ok`` within ``timeout``
    (blocking: supervisors, the stack's health checks and the container healthcheck)."""
    context: zmq.Context[Any] = zmq.Context()
    sock = context.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(endpoint)
        request = {
            "protocol_version": 1,
            "request_id": str(uuid.uuid4()),
            "method": "health",
            "payload": {},
        }
        sock.send(json.dumps(request).encode())
        if not sock.poll(int(timeout * 1000)):
            return False
        return bool(json.loads(sock.recv()).get("status") == "ok")
    finally:
        sock.close(linger=0)
        context.term()


class SnakeLabError(RuntimeError):
    """SnakeLab answered with an error reply (``code`` is the contract's error code)."""

    def __init__(self, code: str, message: str):
        self.code = code
        self.message = message
        super().__init__(f"SnakeLab {code}: {message}")


class SnakeLabUnavailable(RuntimeError):
    """No reply within the timeout (the request may or may not have been processed)."""


class SnakeLabProtocolError(RuntimeError):
    """SnakeLab's reply broke the contract (not JSON, wrong shape, wrong request id)."""


class SnakeLabClient:
    """Async client of one SnakeLab control endpoint."""

    def __init__(
        self, endpoint: str, timeout: float = 3.0, context: zmq.asyncio.Context | None = None
    ):
        self.endpoint = endpoint
        self.timeout = timeout
        self._context = context or zmq.asyncio.Context.instance()

    def host_of(self, run_id: str) -> str | None:
        """The endpoint that ran ``run_id``: the only one (``SnakeLabHosts`` knows several)."""
        return self.endpoint

    async def call(self, method: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return the reply's payload; never retried."""
        request_id = str(uuid.uuid4())
        message = {
            "protocol_version": 1,
            "request_id": request_id,
            "method": method,
            "payload": payload or {},
        }
        raw = await self.exchange(json.dumps(message, allow_nan=False).encode("utf-8"))
        try:
            reply = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SnakeLabProtocolError(f"{method}: reply is not JSON") from exc
        if not isinstance(reply, dict):
            raise SnakeLabProtocolError(f"{method}: reply is not a JSON object")
        try:
            if reply.get("status") == "error":
                error = ControlError.model_validate(reply)
                raise SnakeLabError(error.error.code, error.error.message)
            ok = ControlOk.model_validate(reply)
        except ValidationError as exc:
            raise SnakeLabProtocolError(f"{method}: malformed reply: {exc}") from exc
        if ok.request_id != request_id:
            raise SnakeLabProtocolError(f"{method}: reply for another request {ok.request_id}")
        return ok.payload

    async def exchange(self, raw: bytes) -> bytes:
        """One raw request/reply (``request_reply``; also used by contract tests)."""
        try:
            return await request_reply(self._context, self.endpoint, raw, self.timeout)
        except TimeoutError:
            raise SnakeLabUnavailable(
                f"SnakeLab at {self.endpoint} did not answer within {self.timeout:g} s"
            ) from None

    async def health(self) -> HealthReply:
        return HealthReply.model_validate(await self.call("health"))

    async def submit(self, config: dict[str, Any]) -> SubmitReply:
        """Submit a run. Never retry this: every accepted submit creates a new run."""
        return SubmitReply.model_validate(await self.call("simulation.submit", {"config": config}))

    async def status(self, run_id: str) -> RunStatus:
        return RunStatus.model_validate(await self.call("simulation.status", {"run_id": run_id}))

    async def active(self) -> RunStatus | None:
        return ActiveReply.model_validate(await self.call("simulation.active")).run

    async def pause(self, run_id: str) -> RunStatus:
        return RunStatus.model_validate(await self.call("simulation.pause", {"run_id": run_id}))

    async def resume(self, run_id: str) -> RunStatus:
        return RunStatus.model_validate(await self.call("simulation.resume", {"run_id": run_id}))

    async def cancel(self, run_id: str) -> RunStatus:
        return RunStatus.model_validate(await self.call("simulation.cancel", {"run_id": run_id}))
