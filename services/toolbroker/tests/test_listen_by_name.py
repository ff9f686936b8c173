"""The tool listener binds a DNS name (compose's per-network alias of the broker) on the address
it resolves to, and only there."""

from __future__ import annotations

import socket

import pytest
import zmq
import zmq.asyncio

from ax3l.toolbroker.listener import ToolListener, resolve_bind_endpoint


async def _echo(body: bytes, frames: int) -> bytes:
    return body


def test_a_name_is_bound_on_its_address_and_answers_there():
    """``tcp://localhost:0`` (which ZeroMQ alone refuses to bind) listens on 127.0.0.1, and a
    client connecting to that address gets its reply."""
    context = zmq.asyncio.Context()
    listener = ToolListener("tcp://localhost:0", _echo, 1024, context)
    try:
        bound = listener.bind()
        assert bound.startswith("tcp://127.0.0.1:"), bound
        port = int(bound.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    finally:
        listener.close()
        context.term()


def test_addresses_wildcards_and_interfaces_are_left_to_zeromq():
    assert resolve_bind_endpoint("tcp://0.0.0.0:1") is None
    assert resolve_bind_endpoint("tcp://*:1") is None
    assert resolve_bind_endpoint("tcp://[::1]:1") is None
    assert resolve_bind_endpoint("ipc:///tmp/x") is None
    assert resolve_bind_endpoint("tcp://localhost:7") == "tcp://127.0.0.1:7"


def test_a_name_that_does_not_resolve_is_a_clear_error():
    context = zmq.asyncio.Context()
    listener = ToolListener("tcp://no-such-host.invalid:5", _echo, 1024, context)
    try:
        with pytest.raises(OSError, match=r"cannot listen on tcp://no-such-host\.invalid:5"):
            listener.bind()
    finally:
        context.term()


def test_a_peer_can_queue_only_a_few_messages():
    """L7: the listener queues at most 16 messages per peer (then ZeroMQ stops reading from
    it), not ZeroMQ's default 1,000 of up to 16 times the message limit each."""
    from ax3l.toolbroker.listener import RECEIVE_QUEUE

    context = zmq.asyncio.Context()
    listener = ToolListener("tcp://127.0.0.1:0", _echo, 65536, context)
    try:
        listener.bind()
        assert listener._socket is not None
        assert listener._socket.getsockopt(zmq.RCVHWM) == RECEIVE_QUEUE == 16
    finally:
        listener.close()
        context.term()
