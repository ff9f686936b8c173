"""The tool listener (the spec's ZMQServer): a ROUTER socket answering requests strictly one
at a time, in arrival order.

ROUTER rather than REP so that every framing a client may use gets an answer: REQ clients
(``identity, "", body``) and DEALER clients without the empty delimiter alike; a message with
no or several body frames is answered ``invalid_request``. Messages over the configured
limit (``AX3L_ZMQ_MAX_MESSAGE_BYTES``) get an ``invalid_request`` reply; ZeroMQ itself drops
the connection of a peer that sends more than ``HARD_LIMIT_FACTOR`` times the limit, so a
hostile peer cannot make the broker buffer arbitrary amounts of memory (such a peer gets no
reply and runs into its own timeout).

The endpoint's host may be a DNS name (``tcp://toolbroker-tools:61970``), which ZeroMQ itself
does not bind: it is bound on the address the name resolves to, so that in compose the channel
listens only on the network where that name is the broker's alias.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable

import zmq
import zmq.asyncio

logger = logging.getLogger(__name__)

HARD_LIMIT_FACTOR = 16
RECEIVE_QUEUE = 16


class ToolListener:
    """Binds the tool endpoint and feeds each request to ``handle``, one at a time."""

    def __init__(
        self,
        endpoint: str,
        handle: Callable[[bytes, int], Awaitable[bytes]],
        max_bytes: int,
        context: zmq.asyncio.Context | None = None,
    ):
        self.endpoint = endpoint
        self.handle = handle
        self.max_bytes = max_bytes
        self._context = context or zmq.asyncio.Context.instance()
        self._socket: zmq.asyncio.Socket | None = None

    def bind(self) -> str:
        """Bind the endpoint; returns the bound endpoint (the real port for ``:0``)."""
        sock = self._context.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, self.max_bytes * HARD_LIMIT_FACTOR)
        # Messages queued per peer before ZeroMQ stops reading from it (TCP pushes back, nothing
        # is dropped): 16 of at most 1 MiB, not the default 1,000 (a GiB per peer).
        sock.setsockopt(zmq.RCVHWM, RECEIVE_QUEUE)
        try:
            try:
                sock.bind(self.endpoint)
            except zmq.ZMQError:
                resolved = resolve_bind_endpoint(self.endpoint)
                if resolved is None:
                    raise
                if ":" in resolved.split("//", 1)[1].rsplit(":", 1)[0]:
                    sock.setsockopt(zmq.IPV6, 1)
                sock.bind(resolved)
        except (zmq.ZMQError, OSError) as exc:
            sock.close(linger=0)
            raise OSError(f"cannot listen on {self.endpoint}: {exc}") from None
        self._socket = sock
        bound = sock.getsockopt(zmq.LAST_ENDPOINT)
        return bound.decode() if isinstance(bound, bytes) else str(bound)

    async def serve(self) -> None:
        """Answer requests until cancelled."""
        if self._socket is None:
            self.bind()
        sock = self._socket
        assert sock is not None
        while True:
            frames = await sock.recv_multipart()
            route, body = split_route(frames)
            try:
                reply = await self.handle(b"".join(body), len(body))
            except Exception:
                # handle() answers everything itself; this only guards the loop.
                logger.exception("tool request handler raised")
                continue
            try:
                await sock.send_multipart([*route, reply])
            except zmq.ZMQError as exc:
                logger.warning("could not send a tool reply: %s", exc)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None


def resolve_bind_endpoint(endpoint: str) -> str | None:
    """``tcp://NAME:PORT`` with NAME a DNS name, bound on the first address NAME resolves to
    (IPv4 first); None for anything else (an address, ``*``, an interface, another transport).
    A name that does not resolve is an OSError."""
    if not endpoint.startswith("tcp://") or ":" not in endpoint[6:]:
        return None
    host, _, port = endpoint[6:].rpartition(":")
    if host in ("*", "") or host.startswith("["):
        return None
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    found.sort(key=lambda entry: entry[0] != socket.AF_INET)
    address = str(found[0][4][0])
    return f"tcp://[{address}]:{port}" if ":" in address else f"tcp://{address}:{port}"


def split_route(frames: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """Routing frames (identity, up to the empty delimiter) and the body frames."""
    for position in range(1, len(frames)):
        if frames[position] == b"":
            return frames[: position + 1], frames[position + 1 :]
    return frames[:1], frames[1:]
