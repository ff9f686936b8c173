"""Notes and tags on runs, as optuna-dashboard's trial notes and W&B's tags: one event each
(``run_note_added``, ``run_tagged``, ``run_untagged``, process id the run's id), written by
``ax3l-db note`` and ``ax3l-db tag`` with Ax3l's own login (the report server only reads), read
back in event order by every view that shows them (the runs table and its downloads, the run
and golden pages, the Optuna export). A golden configuration's notes and tags are its run's.

Notes are a person's text, shown as text everywhere (templates escape it). A tag is a short word
(``TAG``): letters, digits and ``_ . : -``, so it reads the same in a URL, a CSV and a filter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import RunNoteAdded, RunTagged, RunUntagged

EVENTS = (RunNoteAdded.event, RunTagged.event, RunUntagged.event)
MAX_NOTE = 2000  # characters of one note
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,39}")


class NoteRefused(ValueError):
    """A note or tag that cannot be written (empty, too long, not a tag, an unknown run)."""


@dataclass
class RunNotes:
    """Each run's notes (oldest first) and tags, from the events fed in event order."""

    notes: dict[str, list[str]] = field(default_factory=dict)
    tags: dict[str, set[str]] = field(default_factory=dict)

    def add(self, name: str, content: Mapping[str, Any]) -> None:
        run_id = content.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            return
        if name == RunNoteAdded.event and isinstance(note := content.get("note"), str):
            self.notes.setdefault(run_id, []).append(note)
        elif name in (RunTagged.event, RunUntagged.event):
            tag = content.get("tag")
            if not isinstance(tag, str):
                return
            held = self.tags.setdefault(run_id, set())
            if name == RunTagged.event:
                held.add(tag)
            else:
                held.discard(tag)

    def tags_of(self, run_id: str) -> list[str]:
        return sorted(self.tags.get(run_id, ()))

    def notes_of(self, run_id: str) -> list[str]:
        return list(self.notes.get(run_id, ()))

    def runs(self) -> set[str]:
        return set(self.notes) | {run for run, held in self.tags.items() if held}


def checked_note(text: str) -> str:
    """The note to store (trimmed), or NoteRefused."""
    note = text.strip()
    if not note:
        raise NoteRefused("the note is empty")
    if len(note) > MAX_NOTE:
        raise NoteRefused(f"the note has {len(note)} characters; at most {MAX_NOTE}")
    return note


def checked_tag(text: str) -> str:
    """The tag, or NoteRefused."""
    if not TAG.fullmatch(text):
        raise NoteRefused(
            f"{text!r} is not a tag: 1 to 40 letters, digits and _ . : -, starting with a"
            " letter or digit"
        )
    return text


async def _known_run(db: Database, run_id: str) -> None:
    if await SnakeLabRuns(db).status(run_id) is None:
        raise NoteRefused(f"SnakeLab has no run {run_id}")


async def add_note(db: Database, run_id: str, text: str) -> int:
    """Write a note on ``run_id``; its event id."""
    note = checked_note(text)
    await _known_run(db, run_id)
    return await EventLog(db).log(RunNoteAdded(run_id=run_id, note=note), process_id=run_id)


async def change_tags(
    db: Database, run_id: str, added: Sequence[str], removed: Sequence[str]
) -> list[int]:
    """Put ``added`` on ``run_id`` and take ``removed`` off, an event each, in one
    transaction; their event ids."""
    put = [checked_tag(tag) for tag in added]
    taken = [checked_tag(tag) for tag in removed]
    if not put and not taken:
        raise NoteRefused("name a tag to put on or (--remove) to take off")
    await _known_run(db, run_id)
    log = EventLog(db)
    async with db.transaction("tagging a run") as cur:
        ids = [
            await log.write(cur, RunTagged(run_id=run_id, tag=tag), process_id=run_id)
            for tag in put
        ]
        ids += [
            await log.write(cur, RunUntagged(run_id=run_id, tag=tag), process_id=run_id)
            for tag in taken
        ]
    return ids
