"""A webhook receiver on 127.0.0.1: the notification service of the alert tests (apprise's
``json://`` URLs post to it)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """Posts land in ``posts`` (parsed JSON); each is answered with ``status``."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                receiver.posts.append(json.loads(self.rfile.read(length)))
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def titles(self) -> list[str]:
        return [str(post["title"]) for post in self.posts]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def webhook_receiver() -> Iterator[Receiver]:
    """A running ``Receiver``, closed afterwards."""
    made = Receiver()
    try:
        yield made
    finally:
        made.close()
