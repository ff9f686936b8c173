"""A scripted ZeroMQ peer: the one stand-in for a SnakeLab control socket or a toolbroker.

``ScriptedPeer`` binds a ROUTER socket to a random port of 127.0.0.1 (REQ and DEALER clients
alike may talk to it), records every request it receives (decoded JSON) and answers each with
what ``answer(request)`` returns, or never when that is None (a peer that went silent).
Its socket lives in a thread of its own and is only ever touched there, so synchronous and
asynchronous tests use it the same way; ``close`` stops the thread and closes the socket.

``snakelab_reply`` and ``broker_reply`` are the two envelopes a peer answers in;
``scripted_snakelab`` is a SnakeLab that answers a table of methods (and ``unknown_method`` to
the others), which the contract suite holds to the contract for what it claims;
``stalling_snakelab`` puts a real SnakeLab behind a peer that answers late (``nth_submit``).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

Answer = Callable[[dict[str, Any]], dict[str, Any] | None]
# A SnakeLab method of a scripted SnakeLab: the request's payload in, ``ok``/``refused`` out.
Method = Callable[[Any], dict[str, Any]]


def snakelab_reply(request: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    """SnakeLab's reply envelope (protocol 1) to ``request``: ``reply`` with the request id."""
    return {"protocol_version": 1, "request_id": request.get("request_id"), **reply}


def ok(payload: dict[str, Any]) -> dict[str, Any]:
    """A SnakeLab success reply's status and payload."""
    return {"status": "ok", "payload": payload}


def refused(code: str, message: str) -> dict[str, Any]:
    """A SnakeLab error reply's status and error."""
    return {"status": "error", "error": {"code": code, "message": message}}


def broker_reply(request: dict[str, Any], payload: Any) -> dict[str, Any]:
    """The toolbroker's reply envelope to a tool's ``request``, carrying ``payload``."""
    return {
        "protocol_version": 1,
        "sender": "ax3l",
        "target": request["sender"],
        "method": request["method"],
        "payload": payload,
    }


class ScriptedPeer:
    """A ROUTER socket on 127.0.0.1 that records requests and answers them with ``answer``."""

    def __init__(self, answer: Answer):
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._bound = threading.Event()
        self.endpoint = ""
        self._thread = threading.Thread(target=self._serve, name="scripted-peer", daemon=True)
        self._thread.start()
        if not self._bound.wait(10):
            raise RuntimeError("the scripted peer did not bind its socket")

    def _serve(self) -> None:
        socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.ROUTER)
        socket.setsockopt(zmq.LINGER, 0)
        try:
            self.endpoint = f"tcp://127.0.0.1:{socket.bind_to_random_port('tcp://127.0.0.1')}"
            self._bound.set()
            while not self._stop.is_set():
                if socket.poll(20):
                    self._handle(socket, socket.recv_multipart())
        finally:
            socket.close(linger=0)

    def _handle(self, socket: zmq.Socket[bytes], frames: list[bytes]) -> None:
        request = json.loads(frames[-1])
        self.requests.append(request)
        reply = self.answer(request)
        if reply is not None:
            socket.send_multipart([*frames[:-1], json.dumps(reply).encode()])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def scripted_snakelab(methods: dict[str, Method]) -> ScriptedPeer:
    """A SnakeLab control socket answering ``methods`` from each request's payload, and
    ``unknown_method`` to any other method."""

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        method = methods.get(request.get("method", ""))
        if method is None:
            return snakelab_reply(
                request, refused("unknown_method", f"unknown method {request.get('method')!r}")
            )
        return snakelab_reply(request, method(request.get("payload")))

    return ScriptedPeer(answer)


def stalling_snakelab(upstream: str, stall: Callable[[dict[str, Any]], float]) -> ScriptedPeer:
    """A SnakeLab that reads a request, has ``upstream`` (a real SnakeLab) handle it, and then
    stalls ``stall(request)`` seconds before it answers: the run is stored at once and its
    answer comes late. Requests are handled one at a time, as SnakeLab does, so a request that
    arrives during a stall is answered after it."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()

    def answer(request: dict[str, Any]) -> dict[str, Any] | None:
        socket: zmq.Socket[bytes] = context.socket(zmq.REQ)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.RCVTIMEO, 10_000)
        try:
            socket.connect(upstream)
            socket.send(json.dumps(request).encode())
            reply: dict[str, Any] = json.loads(socket.recv())
        except zmq.Again:
            return None  # upstream did not answer: neither does this SnakeLab
        finally:
            socket.close(linger=0)
        time.sleep(stall(request))
        return reply

    return ScriptedPeer(answer)


def nth_submit(n: int, seconds: float) -> Callable[[dict[str, Any]], float]:
    """A ``stall`` for ``stalling_snakelab``: ``seconds`` after the ``n``-th submit (from 1)."""
    submits = itertools.count(1)

    def stall(request: dict[str, Any]) -> float:
        if request.get("method") != "simulation.submit":
            return 0.0
        return seconds if next(submits) == n else 0.0

    return stall
