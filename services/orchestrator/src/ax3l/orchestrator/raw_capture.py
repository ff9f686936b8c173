"""Optional raw capture files (off by default).

When ``AX3L_RAW_LOGS_ENABLED`` is true, each conversation's requests and replies are appended as
JSON lines to ``<output>/conversations/<conversation id>.jsonl`` and the loop's console lines to
``<output>/run.log``. When it is off nothing is created, not even the directory; the database
events are written either way.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

DEFAULT_DIRECTORY = Path("ax3l-capture")


class RawCapture:
    """Writes capture files when enabled; every method is a no-op otherwise."""

    def __init__(self, enabled: bool, directory: Path | None):
        self.enabled = enabled
        self.directory = (directory or DEFAULT_DIRECTORY) if enabled else None
        self._handler: logging.Handler | None = None

    def start(self) -> None:
        """Create the directory and route the console log into ``run.log`` too."""
        if self.directory is None:
            return
        (self.directory / "conversations").mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self.directory / "run.log", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        logging.getLogger().addHandler(handler)
        self._handler = handler

    def stop(self) -> None:
        if self._handler is not None:
            logging.getLogger().removeHandler(self._handler)
            self._handler.close()
            self._handler = None

    def record(self, conversation_id: str, kind: str, payload: Any) -> None:
        """Append one request, reply or tool result of a conversation."""
        if self.directory is None:
            return
        line = {"at": time.time(), "kind": kind, "payload": payload}
        path = self.directory / "conversations" / f"{conversation_id}.jsonl"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, default=str) + "\n")
