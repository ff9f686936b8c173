"""The proposers page's leaderboards folded incrementally (``queries/proposer_board.py``) equal
a full read (``proposer_stats``, ``model_stats``, ``seat_stats``) after new events, after a
conversation named only by its proposal's row, after a run finishing, and after the history is
wiped."""

from __future__ import annotations

from typing import Any

from reports_history import insert_runs, read_runs

from ax3l.reports.queries.proposer_board import Board, ProposerBoard
from ax3l.reports.queries.proposers import model_stats, proposer_stats
from ax3l.reports.queries.seats import seat_stats
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.registry import PARAMETER_ORDER
from ax3l.testing.provenance import backfilled

CONFIGURED = "configured-model.gguf"


def _reply(model: str | None, tokens: int) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant"}}],
        "usage": {"completion_tokens": tokens},
        "timings": {"prompt_ms": 100.0 + tokens, "predicted_ms": 900.0},
    }
    if model is not None:
        reply["model"] = model
    return reply


async def _full(db: Database) -> Board:
    return Board(
        proposers=await proposer_stats(db),
        models=await model_stats(db, CONFIGURED),
        seats=await seat_stats(db),
    )


async def _first_part(log: EventLog, runs: list[str]) -> None:
    checkpoint = await log.log(
        "round_robin_checkpoint", {"parameter_order": list(PARAMETER_ORDER), "index": 0}
    )
    # A model conversation: a reply naming its model, a rejection, an anonymous proposal
    # (another process: it belongs to the latest conversation) that becomes golden.
    await log.log(
        "conversation_started",
        {"proposer": "llm", "checkpoint_event_id": checkpoint},
        process_id="p1",
    )
    prompt = await log.log("prompt_sent", "Choose.", process_id="p1")
    await log.log("reply_received", _reply("model-a", 40), process_id="p1", parent_event_id=prompt)
    await log.log(
        "llm_request_failed", {"kind": "no_tool_call", "correctable": True}, process_id="p1"
    )
    await log.log("proposal_rejected_duplicate", {"reason": "ran"}, process_id="b1")
    await log.log("proposal_accepted", {"run_id": runs[0], "parameter": "gamma"}, process_id="b2")
    await log.log("golden_config_created", {"run_id": runs[0], "proposer": "llm"})
    # A conversation nobody names yet (its proposal, in the second part, names it), whose
    # first reply names no model (a later one does).
    await log.log("conversation_started", {"checkpoint_event_id": checkpoint}, process_id="p2")
    await log.log("reply_received", _reply(None, 30), process_id="p2")
    await log.log("llm_request_failed", {"kind": "timeout"}, process_id="p2")
    # A model conversation no reply names a model for: the configured model's.
    await log.log("conversation_started", {"proposer": "llm"}, process_id="p4")
    await log.log("reply_received", _reply(None, 10), process_id="p4")
    # A fallback turn with its proposal, and a seat's calls.
    await log.log(
        "conversation_started",
        {"proposer": "random", "fallback_for": "llm", "checkpoint_event_id": checkpoint},
        process_id="p3",
    )
    await log.log(
        "proposal_accepted",
        {"run_id": runs[1], "parameter": "gamma", "proposer": "random"},
        process_id="p3",
    )
    await log.log(
        "seat_call",
        {
            "seat": "alice",
            "tool": "submit_single_value",
            "outcome": "accepted",
            "run_id": runs[2],
            "checkpoint_event_id": checkpoint,
            "seconds_since_turn_opened": 2.5,
        },
        source_name="alice",
        process_id="s1",
    )
    await log.log(
        "seat_call_refused",
        {"seat": "bob", "tool": "submit_single_value", "reason": "turn_taken"},
        source_name="bob",
        process_id="s2",
    )


async def _second_part(log: EventLog, runs: list[str]) -> None:
    # p2's proposal names its proposer and becomes golden before a reply names p2's model.
    await log.log(
        "proposal_accepted",
        {"run_id": runs[3], "parameter": "gamma", "proposer": "tpe"},
        process_id="p2",
    )
    await log.log("golden_config_created", {"run_id": runs[3], "proposer": "tpe"})
    await log.log("reply_received", _reply("model-b", 20), process_id="p2")
    await log.log("golden_config_created", {"run_id": runs[2]})
    # A conversation whose proposal becomes golden before a reply names its model (the
    # reply comes after the board has read this far).
    await log.log("conversation_started", {"proposer": "llm"}, process_id="p5")
    await log.log("llm_request_failed", {"kind": "timeout"}, process_id="p5")
    await log.log("proposal_accepted", {"run_id": runs[1], "proposer": "llm"}, process_id="b3")
    await log.log("golden_config_created", {"run_id": runs[1]})


async def test_incremental_fold_equals_a_full_read_and_notices_a_wipe(databases, snakelab_tables):
    real = read_runs(limit=4)
    real[3].status = "running"
    run_ids = [run.run_id for run in real]
    snakelab = databases.connect("snakelab", databases.snakelab_db)
    admin = databases.connect("admin", databases.ax3l_db)
    try:
        insert_runs(snakelab, real, episodes_for=0)
        board = ProposerBoard()
        async with Database(databases.settings()) as db:
            log = EventLog(db)
            assert await board.read(db, CONFIGURED) == await _full(db)

            await _first_part(log, run_ids)
            backfilled(databases)  # the proposals' rows, as the broker writes them
            first = await board.read(db, CONFIGURED)
            assert first == await _full(db)
            assert {p.proposer for p in first.proposers} == {"llm", "random", "unknown"}
            assert await board.read(db, CONFIGURED) is first  # nothing new
            folded = board._fold

            await _second_part(log, run_ids)
            backfilled(databases)
            with snakelab.cursor() as cur:
                cur.execute(
                    "UPDATE simulation_runs SET status = 'completed', high_score = 91"
                    " WHERE run_id = %s",
                    (run_ids[3],),
                )
            assert await board.read(db, CONFIGURED) == await _full(db)
            await log.log("reply_received", _reply("model-c", 25), process_id="p5")
            second = await board.read(db, CONFIGURED)
            assert board._fold is folded  # folded on, not read again
            assert second == await _full(db)
            # The conversation named later is tpe's, and model-b's since its second reply.
            tpe = next(p for p in second.proposers if p.proposer == "tpe")
            assert (tpe.conversations, tpe.proposals, tpe.best_score) == (1, 1, 91)
            assert {m.model for m in second.models} == {"model-a", "model-b", "model-c", CONFIGURED}
            assert next(s for s in second.seats if s.seat == "alice").new_goldens == 1
            # Another configured model changes only the drawing (one a reply names: merged).
            for configured in (None, "model-a"):
                assert await board.read(db, configured) == Board(
                    await proposer_stats(db),
                    await model_stats(db, configured),
                    await seat_stats(db),
                )

            # The history wiped and a new one started (event ids start again at 1).
            def wipe() -> None:
                with admin.cursor() as cur:
                    cur.execute("DELETE FROM event_messages")
                    cur.execute("DELETE FROM events")
                    cur.execute("ALTER TABLE events AUTO_INCREMENT = 1")
                admin.commit()

            wipe()
            await log.log("conversation_started", {"proposer": "tpe"}, process_id="q1")
            await log.log(
                "proposal_accepted", {"run_id": run_ids[0], "proposer": "tpe"}, process_id="q1"
            )
            backfilled(databases)
            third = await board.read(db, CONFIGURED)
            assert third == await _full(db)
            assert [(p.proposer, p.proposals) for p in third.proposers] == [("tpe", 1)]
            assert third.models == [] and third.seats == []
            # Emptied: nothing to show.
            wipe()
            assert await board.read(db, CONFIGURED) == Board([], [], [])
    finally:
        snakelab.close()
        admin.close()
