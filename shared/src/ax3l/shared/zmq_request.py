"""One ZeroMQ request and its reply, as Ax3l's clients send them (SnakeLab's control socket,
the tool channel).

A fresh REQ socket per request, LINGER 0, send and receive each bounded by a timeout. A REQ
socket that timed out is closed and never reused, and nothing is resent: the request may
already have been processed, so the caller reports the timeout.
"""

from __future__ import annotations

import asyncio

import zmq
import zmq.asyncio


class EndpointRefused(ValueError):
    """ZeroMQ cannot connect to the endpoint (it cannot parse it or has no such transport)."""


async def request_reply(
    context: zmq.asyncio.Context,
    endpoint: str,
    raw: bytes,
    seconds: float,
    *,
    max_reply_bytes: int | None = None,
) -> bytes:
    """``raw`` sent to ``endpoint`` and the raw reply; ``TimeoutError`` when sending or the reply
    takes longer than ``seconds``, ``EndpointRefused`` when the endpoint cannot be connected,
    ``zmq.ZMQError`` for a socket error after (a reply over ``max_reply_bytes``)."""
    sock = context.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    if max_reply_bytes is not None:
        sock.setsockopt(zmq.MAXMSGSIZE, max_reply_bytes)
    try:
        try:
            sock.connect(endpoint)
        except zmq.ZMQError as exc:
            raise EndpointRefused(str(exc)) from None
        await asyncio.wait_for(sock.send(raw), seconds)
        return bytes(await asyncio.wait_for(sock.recv(), seconds))
    finally:
        sock.close(linger=0)
