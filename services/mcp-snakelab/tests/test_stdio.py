"""The real stdio process: only JSON-RPC on stdout, and the config-file endpoint fallback."""

import json
import os
import subprocess
import sys

from ax3l.shared.waiting import wait_until
from ax3l.testing.mcp_wire import INITIALIZED, call_tool, initialize
from ax3l.testing.zmq_peer import ScriptedPeer, broker_reply


def test_stdio_server_speaks_only_protocol_and_uses_the_config_file_binding(tmp_path):
    """The stdio server writes only JSON-RPC to stdout and finds the config file's endpoint."""
    broker = ScriptedPeer(lambda request: broker_reply(request, {"status": "ok", "run_id": "abc"}))
    port = broker.endpoint.rsplit(":", 1)[1]
    config = tmp_path / "ax3l.json"
    config.write_text(json.dumps({"zmq": {"bind": f"tcp://*:{port}"}}))
    env = {key: value for key, value in os.environ.items() if not key.startswith("AX3L_ZMQ")}
    env.update(AX3L_CONFIG_FILE=str(config), AX3L_CONVERSATION_PARAMETER="batch_size")
    stderr = (tmp_path / "stderr.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "ax3l.app.snakelab.tools"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=env,
    )
    try:
        messages = [
            initialize(),
            INITIALIZED,
            call_tool(2, "submit_single_value", {"value": 32}),
        ]
        assert process.stdin is not None and process.stdout is not None
        for message in messages:
            process.stdin.write((json.dumps(message) + "\n").encode())
        process.stdin.flush()
        wait_until(lambda: broker.requests, 20, "the tool call to reach the config file's endpoint")
        (request,) = broker.requests
        lines = [process.stdout.readline(), process.stdout.readline()]
        process.stdin.close()
        assert process.wait(timeout=20) == 0, "the server should end when stdin closes"
        rest = process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout, stderr):
            if pipe is not None:
                pipe.close()
        broker.close()
    assert request["payload"] == {"parameter": "batch_size", "value": 32}
    replies = [json.loads(line) for line in lines + rest.splitlines()]
    assert all(reply["jsonrpc"] == "2.0" for reply in replies)
    by_id = {reply.get("id"): reply for reply in replies}
    content = by_id[2]["result"]["content"][0]["text"]
    assert json.loads(content) == {"status": "ok", "run_id": "abc"}
