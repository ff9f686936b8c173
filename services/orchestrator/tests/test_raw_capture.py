"""S135: raw capture keeps what is already there. A new orchestrator's capture (a restart, or
another experiment with the same --output) appends to ``run.log`` and to a conversation's
file and never rewrites, truncates or removes a capture file it did not write."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ax3l.orchestrator.raw_capture import RawCapture


def test_existing_capture_files_are_kept_and_appended_to(tmp_path: Path) -> None:
    """Files of an earlier run (its run.log, a conversation this run continues, one it does
    not touch, and a file of the user's own) keep their bytes; new lines come after them."""
    conversations = tmp_path / "conversations"
    conversations.mkdir()
    earlier = {
        tmp_path / "run.log": "2026-01-01 INFO earlier run\n",
        conversations / "c-old.jsonl": '{"kind": "request", "payload": 1}\n',
        conversations / "c-going-on.jsonl": '{"kind": "request", "payload": 2}\n',
        tmp_path / "notes.txt": "mine",
    }
    for path, text in earlier.items():
        path.write_text(text)
    capture = RawCapture(True, tmp_path)
    capture.start()
    try:
        logging.getLogger("ax3l.test").warning("this run's line")
        capture.record("c-going-on", "reply", {"choices": []})
        capture.record("c-new", "request", {"messages": []})
    finally:
        capture.stop()
    for path, text in earlier.items():
        assert path.read_text().startswith(text), path
    assert (conversations / "c-old.jsonl").read_text() == earlier[conversations / "c-old.jsonl"]
    assert (tmp_path / "notes.txt").read_text() == "mine"
    log = (tmp_path / "run.log").read_text().splitlines()
    assert len(log) == 2 and "this run's line" in log[1]
    going_on = (conversations / "c-going-on.jsonl").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in going_on] == ["request", "reply"]
    assert json.loads((conversations / "c-new.jsonl").read_text())["kind"] == "request"
