"""``report_reads`` on a real database: one small history (a conversation with its reply, a
proposal and its ``run_provenance`` row, a seat's poll and accepted submission, a golden with
its high score, a long note on the run), each read checked against it."""

from __future__ import annotations

import json

from ax3l.shared.db import report_reads as reads
from ax3l.shared.db import run_provenance
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.db.report_reads import EXCERPT_CHARS, EventFilter
from ax3l.testing.databases import TestDatabases

NOTE = "n" * (EXCERPT_CHARS + 10)


async def _history(db: Database) -> list[int]:
    log = EventLog(db)
    started = await log.log("conversation_started", {"proposer": "llm"}, process_id="c1")
    reply = {"model": "m", "usage": {"completion_tokens": 7}, "reasoning": "r" * 2000}
    ids = [
        started,
        await log.log("reply_received", reply, process_id="c1", parent_event_id=started),
    ]
    async with db.transaction("proposing") as cur:
        accepted = await log.write(cur, "proposal_accepted", {"run_id": "r1"}, process_id="p1")
        row = run_provenance.Row("r1", accepted, "llm", "gamma", None, None, accepted, None, "c1")
        await run_provenance.write(cur, row)
    ids.append(accepted)
    for outcome in ("polled", "accepted"):
        call = {"seat": "s1", "outcome": outcome}
        ids.append(await log.log("seat_call", call, process_id="c1", source_name="s1"))
    golden = {"run_id": "r1", "config": {}, "high_score": 41}
    ids.append(await log.log("golden_config_created", golden, highscore=HighscoreRow(3, 41, 1)))
    ids.append(await log.log("run_note_added", {"run_id": "r1", "note": NOTE}, process_id="r1"))
    return ids


async def test_the_event_log_reads_page_by_keys_and_cut_contents(databases: TestDatabases):
    """Pages are the nearest events on the cursor's side, newest first; only a reply's
    content is kept whole; an event reads with or without its content, with its children."""
    async with Database(databases.settings()) as db:
        one, reply, accepted, poll, call, golden, note = await _history(db)
        every = EventFilter()
        page = await reads.event_page_rows(db, every, True, None, 2)
        assert [r["event_id"] for r in page] == [note, golden]
        assert len(page[0]["content"]) == EXCERPT_CHARS and page[0]["truncated"] is True
        older = await reads.event_page_rows(db, every, True, poll, 9)
        assert [r["event_id"] for r in older] == [accepted, reply, one]
        newer = await reads.event_page_rows(db, every, False, poll, 2)
        assert [r["event_id"] for r in newer] == [golden, call]
        replies = await reads.event_page_rows(db, EventFilter(name="reply_received"), True, None, 5)
        assert replies[0]["truncated"] is False and len(replies[0]["content"]) > EXCERPT_CHARS
        calls = EventFilter(name="seat_call")
        assert not await reads.event_beyond(db, calls, True, poll)
        assert await reads.event_beyond(db, calls, False, poll)
        assert "content" not in (await reads.event_row(db, one, content=False) or {})
        assert json.loads((await reads.event_row(db, one, content=True) or {})["content"]) == {
            "proposer": "llm"
        }
        assert await reads.event_row(db, note + 1, content=True) is None
        assert [r["event_id"] for r in await reads.child_rows(db, one, 5)] == [reply]
        run = await reads.run_event_rows(db, "r1")
        assert [r["name"] for r in run] == ["run_note_added"]
        assert len(run[0]["content"]) == EXCERPT_CHARS
        first, newest = await reads.history_mark(db)
        assert first is not None and first[0] == one and newest == note


async def test_golden_highscore_and_board_reads(databases: TestDatabases):
    """The golden and high-score series, the boards' windowed reads, the proposals' rows, the
    model's requests, why a run was chosen and the runs table's provenance lines."""
    async with Database(databases.settings()) as db:
        one, reply, accepted, poll, call, golden, note = await _history(db)
        await db.ping()
        rows = await reads.golden_rows(db, None, 5)
        assert [(r["event_id"], r["score"], r["seed"], r["simulations"]) for r in rows] == [
            (golden, 41, 1, 3)
        ]
        assert await reads.golden_rows(db, golden, 5) == []
        assert await reads.highscore_mark(db) == (1, golden)
        assert [r["score"] for r in await reads.highscore_rows(db, 0)] == [41]
        assert await reads.highscore_rows(db, golden) == []
        assert await reads.best_highscore(db) == 41
        texts = await reads.event_texts(db, ("seat_call",), doing="x", after=poll)
        assert [(r["event_id"], r["source_name"]) for r in texts] == [(call, "s1")]
        texts = await reads.event_texts(db, ("seat_call",), doing="x", upto=poll)
        assert [r["event_id"] for r in texts] == [poll]
        assert await reads.proposal_rows(db, upto=accepted) == [
            {"event_id": accepted, "run_id": "r1", "proposer": "llm", "conversation_id": "c1"}
        ]
        assert await reads.proposal_rows(db, after=accepted) == []
        (request,) = await reads.model_requests(db)
        assert (request["event_id"], request["model"], int(request["completion_tokens"])) == (
            reply,
            "m",
            7,
        )
        assert request["asked_at"] is not None
        reasons = await reads.reason_rows(db, ["c1", "c2"])
        assert [r["event_id"] for r in reasons] == [one, reply, call]  # not the poll
        names = ("golden_config_created", "run_note_added")
        blocks = await reads.provenance_event_blocks(db, names, one, note)
        lines = [line for block in blocks for line in json.loads(f"[{block}]")]
        assert lines == [
            [golden, "golden_config_created", None, "r1", None, None],
            [note, "run_note_added", "r1", "r1", NOTE, None],
        ]
        assert await reads.provenance_event_blocks(db, names, note, note) == []
        blocks = await reads.provenance_row_blocks(db, 0, note)
        assert json.loads(f"[{blocks[0]}]") == [["r1", "llm", "gamma", None, "c1"]]
