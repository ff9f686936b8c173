import asyncio
import contextlib
import json
from datetime import timedelta

from ax3l.shared.config_schema import load_schema
from ax3l.shared.db import intents
from ax3l.shared.db.cli import reset_events
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.testing.snakelab_rows import insert_runs
from ax3l.testing.zmq_peer import ScriptedPeer, ok, scripted_snakelab

SCHEMA = load_schema()
DEFAULT = SCHEMA.default_config()


def insert_run(dbs, config, status="queued"):
    """Insert one run the way SnakeLab does (run row and configuration row together)."""
    (run_id,) = insert_runs(dbs, SCHEMA, config, status=status)
    return run_id


@contextlib.asynccontextmanager
async def opened(dbs):
    """The database, its event log and a config index, as the broker holds them."""
    async with Database(dbs.settings()) as db:
        yield db, EventLog(db), ConfigIndex(db, SCHEMA)


async def state_of(db, intent_id):
    """The stored intent's state (None when there is no such intent)."""
    stored = await intents.get_intent(db, intent_id)
    return stored.state if stored is not None else None


def candidate(gamma=0.97):
    return SCHEMA.with_values(DEFAULT, {"training.gamma": gamma})


async def record(db, index, config, after_id=None):
    return await intents.record_intent(
        db,
        entry="gamma",
        config=config,
        values={"value": config["training"]["gamma"]},
        changes={"training.gamma": config["training"]["gamma"]},
        fingerprint=index.fingerprint(config),
        golden_run_id="golden-run",
        golden_event_id=None,
        after_id=await index.position() if after_id is None else after_id,
        source_name="SubmitSingleValueHandler",
    )


async def proposal_events(db):
    rows = await db.fetchall(
        "SELECT e.event_id, e.name, e.process_id, e.parent_event_id, e.parameter, m.content"
        " FROM events e JOIN event_messages m ON m.event_id = e.event_id"
        " WHERE e.name IN ('proposal_accepted', 'simulation_submitted') ORDER BY e.event_id"
    )
    return [{**row, "content": json.loads(row["content"])} for row in rows]


async def test_completion_writes_both_events_once(snakelab_tables):
    """An accepted submission logs proposal_accepted then its child simulation_submitted, once."""
    dbs = snakelab_tables
    async with opened(dbs) as (db, log, index):
        intent_id = await record(db, index, candidate())
        first = await intents.complete_intent(db, log, intent_id, "run-1", 0)
        again = await intents.complete_intent(db, log, intent_id, "run-1", 0)
        events = await proposal_events(db)
        stored = await intents.get_intent(db, intent_id)
    assert first.written and not again.written
    proposal, submitted = events
    assert (
        proposal["name"] == "proposal_accepted"
        and submitted["parent_event_id"] == (proposal["event_id"])
    )
    assert proposal["process_id"] == submitted["process_id"] == "run-1"
    assert proposal["parameter"] == "gamma"
    assert proposal["content"] == {
        "parameter": "gamma",
        "values": {"value": 0.97},
        "changes": {"training.gamma": 0.97},
        "run_id": "run-1",
        "config": candidate(),
        "golden_run_id": "golden-run",
        "golden_event_id": None,
    }
    assert submitted["content"] == {"run_id": "run-1", "config": candidate(), "queue_position": 0}
    assert stored is not None and (stored.state, stored.run_id) == (intents.DONE, "run-1")


async def test_concurrent_reconcilers_adopt_a_run_exactly_once(snakelab_tables):
    """Broker and orchestrator reconciling at once write the adopted run's events once."""
    dbs = snakelab_tables
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA)
        await record(db, index, candidate())
        run_id = insert_run(dbs, candidate())  # SnakeLab created it; the broker then died
        pools = [Database(dbs.settings()) for _ in range(3)]
        try:
            results = await asyncio.gather(
                *(intents.reconcile(pool, SCHEMA, EventLog(pool)) for pool in pools)
            )
        finally:
            for pool in pools:
                await pool.close()
        events = await proposal_events(db)
        assert await intents.pending_intents(db) == []
    assert sorted(r for result in results for r in result) == [run_id]
    assert [e["name"] for e in events] == ["proposal_accepted", "simulation_submitted"]
    assert all(e["content"]["adopted"] is True for e in events)
    assert events[1]["content"]["queue_position"] is None


async def test_completion_after_adoption_writes_nothing(snakelab_tables):
    """The broker finishing late after a reconciler adopted the run adds no second pair."""
    dbs = snakelab_tables
    async with opened(dbs) as (db, log, index):
        intent_id = await record(db, index, candidate())
        run_id = insert_run(dbs, candidate())
        assert await intents.reconcile(db, SCHEMA, log) == [run_id]
        late = await intents.complete_intent(db, log, intent_id, run_id, 3)
        assert not late.written
        assert len(await proposal_events(db)) == 2


async def test_older_or_claimed_runs_are_not_adopted(snakelab_tables):
    """Only runs newer than the intent's check and not claimed by another intent are adopted."""
    dbs = snakelab_tables
    async with opened(dbs) as (db, log, index):
        insert_run(dbs, candidate(0.95))  # existed before the check: never "ours"
        await index.refresh()
        young = await record(db, index, candidate(0.95))
        adopted = await intents.reconcile(
            db,
            SCHEMA,
            log,
        )
        assert adopted == []
        assert [i.intent_id for i in await intents.pending_intents(db)] == [young]
        assert await intents.reconcile(db, SCHEMA, log, abandon_recorded_before=intents.now()) == []
        assert await state_of(db, young) == intents.ABANDONED

        run_id = insert_run(dbs, candidate(0.96))
        taken = await record(db, index, candidate(0.96), after_id=0)
        await intents.complete_intent(db, log, taken, run_id, 0)
        other = await record(db, index, candidate(0.96), after_id=0)
        assert await intents.reconcile(db, SCHEMA, log, abandon_recorded_before=intents.now()) == []
        assert await state_of(db, other) == intents.ABANDONED


async def test_an_abandoned_intent_is_completed_when_snakelab_answers_after_all(snakelab_tables):
    """If SnakeLab's answer arrives after the intent was abandoned, the run still gets events."""
    dbs = snakelab_tables
    async with opened(dbs) as (db, log, index):
        intent_id = await record(db, index, candidate())
        await intents.reconcile(db, SCHEMA, log, abandon_recorded_before=intents.now())
        recorded = await intents.complete_intent(db, log, intent_id, "late-run", 1)
        assert recorded.written
        assert await state_of(db, intent_id) == intents.DONE


async def test_refused_intents_are_closed_and_never_adopted(snakelab_tables):
    """SnakeLab's refusal closes the intent; a later equal run is not adopted for it."""
    dbs = snakelab_tables
    async with opened(dbs) as (db, log, index):
        intent_id = await record(db, index, candidate())
        await intents.refuse_intent(db, intent_id)
        insert_run(dbs, candidate())
        assert await intents.reconcile(db, SCHEMA, log) == []
        assert await state_of(db, intent_id) == intents.REFUSED


async def test_reset_events_forgets_intents(snakelab_tables):
    """ax3l-db reset-events wipes intents, which point at the deleted history."""
    dbs = snakelab_tables
    async with Database(dbs.settings()) as db:
        await record(db, ConfigIndex(db, SCHEMA), candidate())
    reset_events(dbs.settings())
    async with Database(dbs.settings()) as db:
        row = await db.fetchone("SELECT COUNT(*) AS n FROM submission_intents")
    assert row == {"n": 0}


def answering_snakelab():
    """A SnakeLab that answers ``health`` at once."""
    return scripted_snakelab({"health": lambda _: ok({"service": "snake-lab"})})


async def backdate(db, intent_id, seconds_ago):
    async with db.transaction() as cur:
        await cur.execute(
            "UPDATE submission_intents SET created_at = %s WHERE intent_id = %s",
            (intents.now() - timedelta(seconds=seconds_ago), intent_id),
        )


async def record_at(db, index, config, seconds_ago):
    """An intent recorded ``seconds_ago`` s ago (``seconds_ago`` large: no broker can still
    send it)."""
    intent_id = await record(db, index, config)
    await backdate(db, intent_id, seconds_ago)
    return intent_id


async def test_no_intent_is_given_up_while_snakelab_is_silent(snakelab_tables):
    """However old an intent is, without an answer from SnakeLab it stays pending: a SnakeLab
    that stalls may still create its run."""
    silent = ScriptedPeer(lambda request: None)
    try:
        async with opened(snakelab_tables) as (db, log, index):
            intent_id = await record_at(db, index, candidate(), 3600)
            client = SnakeLabClient(silent.endpoint, timeout=0.2)
            still = await intents.settle_pending(db, SCHEMA, log, client, wait_up_to=0.6)
            assert [i.intent_id for i in still] == [intent_id]
            assert await intents.reconcile(db, SCHEMA, log) == []
            assert await state_of(db, intent_id) == intents.PENDING
    finally:
        silent.close()
    assert {r["method"] for r in silent.requests} == {"health"}


async def test_settling_adopts_the_late_run_and_closes_an_intent_without_one(snakelab_tables):
    """Once SnakeLab answers again, the intent whose run appeared is adopted and the other is
    known not to exist and abandoned."""
    lab = answering_snakelab()
    dbs = snakelab_tables
    try:
        async with opened(dbs) as (db, log, index):
            created = await record_at(db, index, candidate(0.93), 60)
            never = await record_at(db, index, candidate(0.94), 60)
            run_id = insert_run(dbs, candidate(0.93))
            client = SnakeLabClient(lab.endpoint, timeout=0.5)
            assert await intents.settle_pending(db, SCHEMA, log, client, wait_up_to=5) == []
            assert await state_of(db, created) == intents.ADOPTED
            assert await state_of(db, never) == intents.ABANDONED
            assert [e["process_id"] for e in await proposal_events(db)] == [run_id, run_id]
    finally:
        lab.close()


async def test_settling_waits_until_no_broker_can_still_send_the_intent(snakelab_tables):
    """An intent recorded just now may still be on its way to SnakeLab: even with SnakeLab
    answering, it is not abandoned before SEND_WINDOW plus the client's timeout has passed."""
    lab = answering_snakelab()
    try:
        async with opened(snakelab_tables) as (db, log, index):
            intent_id = await record(db, index, candidate())
            client = SnakeLabClient(lab.endpoint, timeout=0.5)
            still = await intents.settle_pending(db, SCHEMA, log, client, wait_up_to=1.0)
            assert [i.intent_id for i in still] == [intent_id]
            await backdate(db, intent_id, intents.SEND_WINDOW + 1.0)
            assert await intents.settle_pending(db, SCHEMA, log, client, wait_up_to=3) == []
            assert await state_of(db, intent_id) == intents.ABANDONED
    finally:
        lab.close()
