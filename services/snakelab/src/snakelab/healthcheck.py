"""The container healthcheck: exit 0 when the control socket answers ``health``, else 1. The
ping itself is Ax3l's client's (``ax3l.shared.snakelab_client.ping``), which tests and
benchmarks also wait on after starting a server."""

from __future__ import annotations

import os
import sys

import zmq

from ax3l.shared.snakelab_client import ping

HEALTHCHECK_TIMEOUT_SECONDS = 3.0


def main() -> int:
    endpoint = os.environ.get("SNAKELAB_HEALTH_ENDPOINT", "tcp://127.0.0.1:41970")
    try:
        return 0 if ping(endpoint, HEALTHCHECK_TIMEOUT_SECONDS) else 1
    except (zmq.ZMQError, ValueError):
        return 1


if __name__ == "__main__":
    sys.exit(main())
