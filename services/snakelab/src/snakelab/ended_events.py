"""``snake_lab.simulation.ended``: published on the events PUB socket after a run's end is stored.

Best effort, as in the real SnakeLab: nobody may depend on it (Ax3l polls the status). The
worker thread hands ended runs to the control thread over an inproc PUSH/PULL pair, so the
PUB socket is used by the one thread that owns it.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import zmq

from snakelab.runs import Run

log = logging.getLogger(__name__)

TOPIC = "snake_lab.simulation.ended"
HANDOFF_ENDPOINT = "inproc://snakelab-ended-events"


def ended_message(run: Run) -> dict[str, Any]:
    """The event's body."""
    return {
        "run_id": run.run_id,
        "state": run.state,
        "episode_count": run.completed_epochs,
        "high_score": run.high_score,
        "error": run.error,
    }


class EndedEvents:
    """The PUB socket (owned by the control thread) and the hand-off from other threads."""

    def __init__(self, context: zmq.Context[Any], endpoint: str):
        self.context = context
        self.endpoint = endpoint
        self.publisher: zmq.Socket[Any] | None = context.socket(zmq.PUB)
        self.publisher.setsockopt(zmq.LINGER, 0)
        try:
            self.publisher.bind(endpoint)
        except zmq.ZMQError as exc:
            # Best effort: a busy events port must not keep the control socket down.
            log.warning("events not published: cannot bind %s (%s)", endpoint, exc)
            self.publisher.close(linger=0)
            self.publisher = None
        self.inbox: zmq.Socket[Any] = context.socket(zmq.PULL)
        self.inbox.setsockopt(zmq.LINGER, 0)
        self.inbox.bind(HANDOFF_ENDPOINT)
        self._senders = threading.local()
        self._all_senders: list[zmq.Socket[Any]] = []
        self._lock = threading.Lock()

    def hand_off(self, run: Run) -> None:
        """Queue ``run``'s event for the control thread (callable from any thread)."""
        if self.publisher is None:
            return
        sender = getattr(self._senders, "socket", None)
        if sender is None:
            sender = self.context.socket(zmq.PUSH)
            sender.setsockopt(zmq.LINGER, 0)
            sender.connect(HANDOFF_ENDPOINT)
            self._senders.socket = sender
            with self._lock:
                self._all_senders.append(sender)
        try:
            sender.send_json(ended_message(run), zmq.NOBLOCK)
        except zmq.Again:
            log.warning("events backlog full; dropped the end of run %s", run.run_id)

    def publish(self, run: Run) -> None:
        """Publish ``run``'s event now (control thread only)."""
        if self.publisher is not None:
            body = json.dumps(ended_message(run)).encode()
            self.publisher.send_multipart([TOPIC.encode(), body])

    def drain(self) -> None:
        """Publish every handed-off event (control thread only)."""
        while True:
            try:
                body = self.inbox.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if self.publisher is not None:
                self.publisher.send_multipart([TOPIC.encode(), body])

    def close(self) -> None:
        """Close the sockets (after the worker thread stopped)."""
        with self._lock:
            senders, self._all_senders = self._all_senders, []
        for sender in senders:
            sender.close(linger=0)
        self.inbox.close(linger=0)
        if self.publisher is not None:
            self.publisher.close(linger=0)
