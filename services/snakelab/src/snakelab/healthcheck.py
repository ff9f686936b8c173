"""Container healthcheck: exit 0 when the control socket answers ``health``, else 1."""

from __future__ import annotations

import json
import os
import sys
import uuid

import zmq


def main() -> int:
    endpoint = os.environ.get("SNAKELAB_HEALTH_ENDPOINT", "tcp://127.0.0.1:41970")
    context = zmq.Context()
    sock = context.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDTIMEO, 3000)
    sock.setsockopt(zmq.RCVTIMEO, 3000)
    try:
        sock.connect(endpoint)
        request = {
            "protocol_version": 1,
            "request_id": str(uuid.uuid4()),
            "method": "health",
            "payload": {},
        }
        sock.send_string(json.dumps(request))
        reply = json.loads(sock.recv())
        return 0 if reply.get("status") == "ok" else 1
    except (zmq.ZMQError, ValueError):
        return 1
    finally:
        sock.close(linger=0)
        context.term()


if __name__ == "__main__":
    sys.exit(main())
