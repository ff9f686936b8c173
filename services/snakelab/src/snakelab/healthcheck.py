"""The ``health`` ping: the container healthcheck (exit 0 when the control socket answers
``health``, else 1), and what tests and benchmarks wait on after starting a server."""

from __future__ import annotations

import json
import os
import sys
import uuid
from typing import Any

import zmq

HEALTHCHECK_TIMEOUT_SECONDS = 3.0


def ping(endpoint: str, timeout: float = 0.5) -> bool:
    """True when a SnakeLab at ``endpoint`` answers ``health`` within ``timeout``."""
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


def main() -> int:
    endpoint = os.environ.get("SNAKELAB_HEALTH_ENDPOINT", "tcp://127.0.0.1:41970")
    try:
        return 0 if ping(endpoint, HEALTHCHECK_TIMEOUT_SECONDS) else 1
    except (zmq.ZMQError, ValueError):
        return 1


if __name__ == "__main__":
    sys.exit(main())
