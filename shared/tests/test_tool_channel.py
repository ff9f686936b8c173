import asyncio
import json

import pytest
import zmq
import zmq.asyncio

from ax3l.shared.settings import Settings
from ax3l.shared.tool_channel import (
    DEFAULT_ENDPOINT,
    ToolChannelError,
    ToolChannelProtocolError,
    ToolChannelTimeout,
    ZMQClient,
    client_endpoint,
    decode,
    encode,
    endpoint_from_config_file,
    listen_endpoint,
    request_envelope,
)
from ax3l.shared.wire import ToolEnvelope
from ax3l.testing.plugin import free_port


def test_request_envelope_has_the_contract_shape():
    """A request is the five-key envelope from mcp-snakelab to snakelab."""
    message = request_envelope("submit_pair_values", {"pair": "epsilon_pair", "value_1": 0.96})
    assert encode(message) == (
        b'{"protocol_version": 1, "sender": "mcp-snakelab", "target": "snakelab",'
        b' "method": "submit_pair_values", "payload": {"pair": "epsilon_pair", "value_1": 0.96}}'
    )
    assert json.loads(encode(message)) == {
        "protocol_version": 1,
        "sender": "mcp-snakelab",
        "target": "snakelab",
        "method": "submit_pair_values",
        "payload": {"pair": "epsilon_pair", "value_1": 0.96},
    }
    assert decode(encode(message)) == message


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe",
        b"[1, 2]",
        b'{"protocol_version": true, "sender": "a", "target": "b", "method": "m", "payload": {}}',
        b'{"protocol_version": 1, "sender": "a", "target": "b", "method": "m", "payload": []}',
        b'{"protocol_version": 1, "sender": "a", "target": "b", "method": "m", "payload": {},'
        b' "extra": 1}',
        b"[" * 100_000,
    ],
)
def test_malformed_envelopes_are_protocol_errors(raw):
    """Non-JSON, non-objects, wrong types, extra keys and deep nesting are refused clearly."""
    with pytest.raises(ToolChannelProtocolError):
        decode(raw)


def test_non_finite_numbers_cannot_be_encoded():
    """NaN has no JSON form, so such a message is refused before sending."""
    with pytest.raises(ToolChannelProtocolError):
        encode(request_envelope("submit_single_value", {"value": float("nan")}))


async def test_call_returns_the_reply_payload():
    """The client sends one envelope and returns the reply's payload unchanged."""
    context = zmq.asyncio.Context()
    server = context.socket(zmq.REP)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    try:

        async def answer():
            request = json.loads(await server.recv())
            reply = ToolEnvelope(
                protocol_version=1,
                sender="ax3l",
                target=request["sender"],
                method=request["method"],
                payload={"status": "ok"},
            )
            await server.send(encode(reply))
            return request

        answering = asyncio.create_task(answer())
        client = ZMQClient(f"tcp://127.0.0.1:{port}", timeout=5, context=context)
        payload = await client.call("submit_single_value", {"parameter": "gamma", "value": 0.97})
        request = await answering
    finally:
        server.close(linger=0)
        context.term()
    assert payload == {"status": "ok"}
    assert request["payload"] == {"parameter": "gamma", "value": 0.97}


async def test_a_timeout_is_reported_and_never_retried():
    """A silent peer gets exactly one request; the caller gets ToolChannelTimeout."""
    context = zmq.asyncio.Context()
    server = context.socket(zmq.ROUTER)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    try:
        client = ZMQClient(f"tcp://127.0.0.1:{port}", timeout=0.3, context=context)
        with pytest.raises(ToolChannelTimeout, match="not retried"):
            await client.call("submit_single_value", {"parameter": "gamma", "value": 0.9})
        received = 0
        while await server.poll(200):
            await server.recv_multipart()
            received += 1
    finally:
        server.close(linger=0)
        context.term()
    assert received == 1


async def test_nothing_listening_times_out():
    """With no broker at the endpoint the call ends at the timeout, not earlier or never."""
    client = ZMQClient(f"tcp://127.0.0.1:{free_port()}", timeout=0.2)
    with pytest.raises(ToolChannelTimeout):
        await client.call("submit_single_value", {})


async def test_a_bad_endpoint_is_a_channel_error():
    """An endpoint ZeroMQ cannot parse is reported, not raised as a ZMQError."""
    with pytest.raises(ToolChannelError, match="cannot connect"):
        await ZMQClient("no-such-transport://x", timeout=0.2).call("m", {})


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"zmq": "tcp://10.0.0.1:5000"}, "tcp://10.0.0.1:5000"),
        ({"zmq": {"bind": "tcp://*:5001"}}, "tcp://*:5001"),
        ({"network": {"zmq": {"endpoint": "tcp://127.0.0.1:5002"}}}, "tcp://127.0.0.1:5002"),
        ({"networks": {"zmq": "ipc:///tmp/ax3l"}}, "ipc:///tmp/ax3l"),
        ({"zmq": {"port": 1}}, None),
        ([1, 2], None),
    ],
)
def test_config_file_shapes(tmp_path, document, expected):
    """The zmq binding is read from the documented shapes; anything else is skipped."""
    path = tmp_path / "ax3l.json"
    path.write_text(json.dumps(document))
    assert endpoint_from_config_file(path) == expected


def test_endpoint_precedence(tmp_path):
    """Env wins over the config file, which wins over the default; wildcards become local."""
    path = tmp_path / "ax3l.json"
    path.write_text(json.dumps({"zmq": {"bind": "tcp://0.0.0.0:6000"}}))
    from_file = Settings(AX3L_CONFIG_FILE=str(path))
    assert listen_endpoint(from_file) == "tcp://0.0.0.0:6000"
    assert client_endpoint(from_file) == "tcp://127.0.0.1:6000"
    assert listen_endpoint(from_file, "tcp://127.0.0.1:7000") == "tcp://127.0.0.1:7000"
    explicit = Settings(AX3L_CONFIG_FILE=str(path), AX3L_ZMQ_ENDPOINT="tcp://127.0.0.1:6001")
    assert client_endpoint(explicit) == "tcp://127.0.0.1:6001"
    missing = Settings(AX3L_CONFIG_FILE=str(tmp_path / "absent.json"))
    assert client_endpoint(missing) == DEFAULT_ENDPOINT
