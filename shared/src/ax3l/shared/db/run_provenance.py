"""Who made each SnakeLab run, and for which entry: one reading of the events, shared by every
view that names a run's proposer (the report's ``/runs`` and golden pages, the Optuna export),
so they agree on every run.

* A proposal's run (``proposal_accepted``, written by the broker): the proposer the event names,
  else its conversation's (the ``conversation_started`` of the same process), else the latest
  conversation's before it (conversations run one at a time). The broker's events name no
  proposer, so in practice it is the conversation's. The entry is the proposal's parameter.
* A run the loop submitted itself (``simulation_submitted`` with a ``purpose``: ``seeding``,
  ``seed_rotation``, ``confirmation``...): proposer ``ax3l`` (``LOOP``), the purpose as its
  entry.
* A resubmission (``simulation_submitted`` with ``retry_of``): the run it retries' proposer and
  entry.

With each of these runs it keeps the golden configuration of its time (``challenged``): the one
a proposal was built from (its ``golden_run_id``, else the newest ``golden_config_created``
before it), the one a loop's run re-ran or confirmed against, a retry's original's; and the
conversation that proposed it (``conversation``: the process of the accepted
``conversation_ended`` naming the run, else of the conversation the proposer was read from).

Feed the events in ``event_id`` order (``add``); a run no event names has neither.

Since schema revision 0003 this is written once, when it happens: a ``run_provenance`` row per
run (``Row``) in the transaction of the event that made the run (``write``: the broker's
``proposal_accepted``, ``ax3l.shared.db.intents``; the loop's ``simulation_submitted``,
``write_loop_run``), and every view reads the rows. ``RunProvenance`` lives on as the rule the
revision back-filled older histories with (``backfill_rows``); the writers apply the same rule
at the moment of the event (the latest conversation, the latest golden, a retry's original).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import astuple, dataclass, field, fields
from typing import Any

from ax3l.shared.db.database import Database, tables_present

LOOP = "ax3l"  # the proposer of the runs the loop submits itself
# The events ``add`` reads; with ``golden_config_created`` for ``golden``.
EVENTS = ("conversation_started", "proposal_accepted", "simulation_submitted", "conversation_ended")
GOLDEN_EVENT = "golden_config_created"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass
class RunProvenance:
    """Each run's proposer and entry, the runs that became golden, and each run's golden of
    its time and conversation."""

    proposer: dict[str, str] = field(default_factory=dict)
    entry: dict[str, str] = field(default_factory=dict)
    golden: set[str] = field(default_factory=set)
    challenged: dict[str, str] = field(default_factory=dict)
    conversation: dict[str, str] = field(default_factory=dict)
    by_process: dict[str, str] = field(default_factory=dict)
    latest_conversation: str | None = None
    latest_conversation_id: str | None = None
    current_golden: str | None = None
    made_by: dict[str, int] = field(default_factory=dict)  # the event that made each run
    purpose: dict[str, str] = field(default_factory=dict)
    retry_of: dict[str, str] = field(default_factory=dict)
    proposal: dict[str, int] = field(default_factory=dict)  # its proposal_accepted event

    def add(
        self,
        name: str,
        process_id: str | None,
        content: Mapping[str, Any],
        event_id: int | None = None,
    ) -> None:
        """One event (its name, process and JSON content's fields, and its id), in event
        order."""
        proposer, run_id = _text(content.get("proposer")), _text(content.get("run_id"))
        if name == "conversation_started":
            if proposer and process_id:
                self.by_process.setdefault(process_id, proposer)
            self.latest_conversation = proposer or self.by_process.get(process_id or "")
            self.latest_conversation_id = process_id
        elif name == "proposal_accepted" and run_id:
            self._proposed(run_id, proposer, process_id, content, event_id)
        elif name == "conversation_ended" and run_id and process_id:
            if content.get("outcome") == "accepted":
                self.conversation[run_id] = process_id
        elif name == "simulation_submitted" and run_id:
            self._submitted(run_id, content, event_id)
        elif name == GOLDEN_EVENT and run_id:
            self.golden.add(run_id)
            self.current_golden = run_id

    def _proposed(
        self,
        run_id: str,
        proposer: str | None,
        process_id: str | None,
        content: Mapping[str, Any],
        event_id: int | None,
    ) -> None:
        if proposer and process_id:
            self.by_process.setdefault(process_id, proposer)
        named = proposer or self.by_process.get(process_id or "") or self.latest_conversation
        if named:
            self.proposer[run_id] = named
        if _text(content.get("parameter")):
            self.entry[run_id] = content["parameter"]
        # The broker writes it under the run's id; an older writer under the conversation's.
        talked = process_id if process_id in self.by_process else self.latest_conversation_id
        if talked:
            self.conversation.setdefault(run_id, talked)
        self._challenges(run_id, _text(content.get("golden_run_id")))
        if event_id is not None:
            self.made_by[run_id] = self.proposal[run_id] = event_id

    def _challenges(self, run_id: str, golden: str | None) -> None:
        """``run_id`` was built from (or re-runs) ``golden``, else the newest golden so far."""
        golden = golden or self.current_golden
        if golden and golden != run_id:
            self.challenged.setdefault(run_id, golden)

    def _submitted(self, run_id: str, content: Mapping[str, Any], event_id: int | None) -> None:
        original = _text(content.get("retry_of"))
        purpose = _text(content.get("purpose"))
        if original and (original in self.proposer or original in self.entry):
            self._inherit(run_id, original)
        elif purpose and run_id not in self.proposer:
            self.proposer[run_id] = LOOP
            self.entry.setdefault(run_id, purpose)
            self._challenges(run_id, None)
        else:
            return
        if event_id is not None and run_id not in self.made_by:
            self.made_by[run_id] = event_id
            if purpose:
                self.purpose[run_id] = purpose
            if original:
                self.retry_of[run_id] = original

    def _inherit(self, run_id: str, original: str) -> None:
        for known in (self.proposer, self.entry, self.challenged, self.conversation):
            if original in known:
                known[run_id] = known[original]
        if original in self.proposal:
            self.proposal[run_id] = self.proposal[original]

    def rows(self) -> list[Row]:
        """A ``Row`` for each run an event made (``add`` given the events' ids)."""
        return [
            Row(
                run_id,
                event_id,
                self.proposer.get(run_id),
                self.entry.get(run_id),
                self.purpose.get(run_id),
                self.retry_of.get(run_id),
                self.proposal.get(run_id),
                self.challenged.get(run_id),
                self.conversation.get(run_id),
            )
            for run_id, event_id in sorted(self.made_by.items(), key=lambda item: item[1])
        ]


# -- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """A ``run_provenance`` row (``ax3l.shared.db.tables.RUN_PROVENANCE``)."""

    run_id: str
    event_id: int
    proposer: str | None
    entry: str | None
    purpose: str | None = None
    retry_of: str | None = None
    proposal_event_id: int | None = None
    golden_run_id: str | None = None
    conversation_id: str | None = None


COLUMNS = tuple(f.name for f in fields(Row))
# A run's first row stays (a no-op update: ``INSERT IGNORE`` would warn).
INSERT = (
    f"INSERT INTO run_provenance ({', '.join(COLUMNS)})"
    f" VALUES ({', '.join(['%s'] * len(COLUMNS))}) ON DUPLICATE KEY UPDATE run_id = run_id"
)


def backfill_rows(events: Iterable[tuple[int, str, str | None, str | None]]) -> list[Row]:
    """The rows of a history's runs by ``RunProvenance`` (events as ``(event_id, name,
    process_id, content text)`` in event order): what the writers write as the events happen."""
    found = RunProvenance()
    for event_id, name, process_id, text in events:
        try:
            content = json.loads(text) if text is not None else None
        except ValueError:
            continue
        if isinstance(content, dict):
            found.add(name, process_id, content, event_id)
    return found.rows()


def _history(cur: Any, window: int) -> Iterator[tuple[int, str, str | None, str | None]]:
    """The events ``RunProvenance`` reads, in event order, ``window`` event ids at a time."""
    names = (*EVENTS, GOLDEN_EVENT)
    cur.execute("SELECT COALESCE(MAX(event_id), 0) FROM events")
    newest = int(cur.fetchone()[0])
    for start in range(0, newest, window):
        cur.execute(
            "SELECT e.event_id, e.name, e.process_id, m.content FROM events e"
            " LEFT JOIN event_messages m ON m.event_id = e.event_id"
            " WHERE e.event_id > %s AND e.event_id <= %s"
            f" AND e.name IN ({', '.join(['%s'] * len(names))}) ORDER BY e.event_id",
            (start, start + window, *names),
        )
        yield from cur.fetchall()


def backfill(cur: Any, window: int = 100_000, batch: int = 5_000) -> int:
    """Write the row of every run of the history that has none, by ``backfill_rows`` (``cur``:
    a blocking DB-API cursor, inside the caller's transaction); the number of rows written.
    Schema revision 0003 ran it once on the histories of older releases."""
    rows = backfill_rows(_history(cur, window))
    written = 0
    for start in range(0, len(rows), batch):
        cur.executemany(INSERT, [astuple(row) for row in rows[start : start + batch]])
        written += max(cur.rowcount, 0)
    return written


async def table_present(db: Database) -> bool:
    """Whether the database has the table: one only the user's own tables make (an older
    system's, read without migration) has none, and no run a row."""
    return await tables_present(db, ("run_provenance",), "looking for the run_provenance table")


async def _latest(cur: Any, name: str) -> tuple[str | None, dict[str, Any]]:
    """The process id and JSON content of the latest event named ``name`` (``{}``: none)."""
    await cur.execute(
        "SELECT e.process_id, m.content FROM events e"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id"
        " WHERE e.name = %s ORDER BY e.event_id DESC LIMIT 1",
        (name,),
    )
    row = await cur.fetchone()  # a dict, as the services' cursors give rows
    if not row:
        return None, {}
    try:
        content = json.loads(row["content"] or "{}")
    except ValueError:
        content = {}
    return row["process_id"], content if isinstance(content, dict) else {}


async def latest_conversation(cur: Any) -> tuple[str | None, str | None]:
    """``(proposer, process id)`` of the latest ``conversation_started``: conversations run one
    at a time, so the one a proposal made now belongs to."""
    process_id, content = await _latest(cur, "conversation_started")
    return _text(content.get("proposer")), process_id


async def write(cur: Any, row: Row) -> None:
    """``row``, inside the transaction of the event that made its run (a run's first writer
    wins: a re-recorded run keeps its row)."""
    await cur.execute(INSERT, astuple(row))


async def write_loop_run(
    cur: Any, run_id: str, event_id: int, purpose: str, retry_of: str | None = None
) -> None:
    """The row of a run the loop submitted itself (its ``simulation_submitted`` is
    ``event_id``): a retry's original's proposer, entry, proposal, golden and conversation when
    the original has a row; else ``LOOP`` with ``purpose`` and the golden of its time."""
    if retry_of:
        await cur.execute(
            "SELECT proposer, entry, proposal_event_id, golden_run_id, conversation_id"
            " FROM run_provenance WHERE run_id = %s",
            (retry_of,),
        )
        original = await cur.fetchone()  # a dict, as the services' cursors give rows
        if original:
            await write(cur, Row(run_id, event_id, purpose=purpose, retry_of=retry_of, **original))
            return
    _, golden = await _latest(cur, GOLDEN_EVENT)
    challenged = _text(golden.get("run_id"))
    challenged = challenged if challenged != run_id else None
    await write(cur, Row(run_id, event_id, LOOP, purpose, purpose, retry_of, None, challenged))
