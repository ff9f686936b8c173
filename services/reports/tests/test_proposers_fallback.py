"""The Proposers page counts the turns a failing model lost to the fallback proposer."""

from __future__ import annotations

from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import ConversationStarted, ProposalAccepted, RoundRobinCheckpoint
from ax3l.shared.registry import PARAMETER_ORDER
from ax3l.testing.provenance import backfilled


async def _turn(log: EventLog, index: int, conversations: list[dict], run_id: str) -> None:
    """A checkpoint, its conversations (each a conversation_started content) and a proposal."""
    checkpoint = await log.log(
        RoundRobinCheckpoint(parameter_order=list(PARAMETER_ORDER), index=index)
    )
    parameter = PARAMETER_ORDER[index]
    for number, content in enumerate(conversations):
        await log.log(
            ConversationStarted(
                parameter=parameter, index=index, checkpoint_event_id=checkpoint, **content
            ),
            process_id=f"{run_id[:30]}-{number}",
            parameter=parameter,
        )
    await log.log(
        ProposalAccepted(parameter=parameter, values={"value": 1}, run_id=run_id),
        process_id=run_id,
        parameter=parameter,
    )


async def test_fallback_turns_count_for_the_fallback_and_against_the_model(
    snakelab_tables, make_client
):
    """Turns the fallback took count once per turn (a retried fallback too) for it, with its
    proposals, and as lost for the model; normal turns count for neither."""
    llm = {"proposer": "llm"}
    fallback = {"proposer": "tpe", "fallback_for": "llm", "failure_streak": 3}
    async with Database(snakelab_tables.settings()) as db:
        log = EventLog(db)
        await _turn(log, 0, [llm, llm, llm, fallback], "00000000-0000-4000-8000-000000000001")
        await _turn(log, 1, [llm], "00000000-0000-4000-8000-000000000002")
        await _turn(
            log, 2, [llm, llm, llm, fallback, fallback], "00000000-0000-4000-8000-000000000003"
        )
    backfilled(snakelab_tables)  # the proposals' rows, as the broker writes them
    async with make_client(snakelab_tables) as http:
        found = (await http.get("/api/proposers")).json()
        by_name = {p["proposer"]: p for p in found["proposers"]}
        assert {k: by_name["tpe"][k] for k in ("conversations", "proposals")} == {
            "conversations": 3,
            "proposals": 2,
        }
        assert (
            by_name["tpe"]["fallback_turns"],
            by_name["tpe"]["fallback_proposals"],
            by_name["tpe"]["turns_lost_to_fallback"],
        ) == (2, 2, 0)
        assert (by_name["llm"]["conversations"], by_name["llm"]["proposals"]) == (7, 1)
        assert (by_name["llm"]["fallback_turns"], by_name["llm"]["turns_lost_to_fallback"]) == (
            0,
            2,
        )
        page = (await http.get("/proposers")).text
        llm_row = page[page.index('data-proposer="llm"') :].split("</tr>")[0]
        assert '<td class="num lost-turns">2</td>' in llm_row
        tpe_row = page[page.index('data-proposer="tpe"') :].split("</tr>")[0]
        assert '2 <span class="muted">(2 accepted)</span>' in tpe_row
        assert 'id="fallback-note"' in page
        events = (await http.get("/api/events", params={"event": "conversation_started"})).json()
        assert events["events"][0]["summary"] == (
            "tpe proposed for batch_size after 3 failed model conversations"
        )


async def test_under_a_hybrid_the_page_says_who_decided_each_turn(snakelab_tables, make_client):
    """With llm+model turns, the page says the llm+model row's turns were the LLM's (with the
    share) and the model row's the classical proposer's."""
    llm = {"proposer": "llm+model", "hybrid": "llm+model", "decided_by": "llm"}
    classical = {"proposer": "model", "hybrid": "llm+model", "decided_by": "model"}
    async with Database(snakelab_tables.settings()) as db:
        log = EventLog(db)
        await _turn(log, 0, [classical], "00000000-0000-4000-8000-000000000001")
        await _turn(log, 1, [llm], "00000000-0000-4000-8000-000000000002")
    backfilled(snakelab_tables)
    async with make_client(snakelab_tables) as http:
        page = (await http.get("/proposers")).text
        note = page[page.index('id="decided-by"') :].split("</p>")[0]
        assert "under <code>llm+model</code> the LLM decided the turns" in note
        assert "0.30" in note and "<code>model</code>" in note
        assert 'data-proposer="llm+model"' in page and 'data-proposer="model"' in page
