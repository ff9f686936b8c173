"""One ZeroMQ request and its reply (SnakeLab's control socket, the tool channel): a fresh REQ
socket with LINGER 0, closed after; nothing is resent, as a request that timed out may already
have been processed."""

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
