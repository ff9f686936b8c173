"""``run_provenance``: the writers' rows (the broker's acceptance and adoption, the loop's own
runs and retries) are the rows the upgrade's back-fill gives for the same events, and each is
written in its event's transaction: a failure after the event leaves neither."""

from __future__ import annotations

import pytest

from ax3l.shared.config_schema import load_schema
from ax3l.shared.db import intents, run_provenance
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import (
    ConversationStarted,
    GoldenConfigCreated,
    SimulationSubmitted,
)
from ax3l.testing.databases import TestDatabases
from ax3l.testing.provenance import backfilled
from ax3l.testing.snakelab_rows import insert_runs

SCHEMA = load_schema()
DEFAULT = SCHEMA.default_config()


def _table(databases: TestDatabases) -> list[tuple[object, ...]]:
    columns = ", ".join(run_provenance.COLUMNS)
    return databases.query(f"SELECT {columns} FROM run_provenance ORDER BY event_id")


async def _loop_run(
    db: Database,
    log: EventLog,
    run_id: str,
    purpose: str,
    retry_of: str | None = None,
    fail: bool = False,
) -> int:
    """A run the loop submitted itself, recorded as ``baselines``/``infra_retry`` record it
    (``fail``: the process dies after both statements, before the commit)."""
    async with db.transaction("recording a run") as cur:
        event_id = await log.write(
            cur,
            SimulationSubmitted(run_id=run_id, purpose=purpose, retry_of=retry_of),
            process_id=run_id,
        )
        await run_provenance.write_loop_run(cur, run_id, event_id, purpose, retry_of)
        if fail:
            raise RuntimeError("killed before the commit")
    return event_id


async def _proposal(
    dbs: TestDatabases, db: Database, log: EventLog, gamma: float, run_id: str | None
) -> str:
    """A proposal the broker completes (``run_id``), or whose answer was lost and that a
    reconciler adopts (None: SnakeLab's run is found by its configuration); its run id."""
    index = ConfigIndex(db, SCHEMA)
    config = SCHEMA.with_values(DEFAULT, {"training.gamma": gamma})
    intent_id = await intents.record_intent(
        db,
        entry="gamma",
        config=config,
        values={"value": gamma},
        changes={"training.gamma": gamma},
        fingerprint=index.fingerprint(config),
        golden_run_id="seeding-run",
        golden_event_id=None,
        after_id=await index.position(),
    )
    if run_id is not None:
        await intents.complete_intent(db, log, intent_id, run_id, 0)
        return run_id
    (created,) = insert_runs(dbs, SCHEMA, config, status="queued")
    assert await intents.reconcile(db, SCHEMA, log, index=index) == [created]
    return str(created)


async def test_the_writers_rows_are_the_back_fills_rows(snakelab_tables: TestDatabases) -> None:
    dbs = snakelab_tables
    async with Database(dbs.settings()) as db:
        log = EventLog(db)
        await _loop_run(db, log, "seeding-run", "seeding")
        await log.log(
            GoldenConfigCreated(
                run_id="seeding-run",
                config=DEFAULT,
                high_score=40,
                seed=1970,
                simulations=1,
                reason="seeding",
            )
        )
        await log.log(ConversationStarted(proposer="tpe", parameter="gamma"), process_id="c-1")
        await _proposal(dbs, db, log, 0.97, "proposal-run")
        await _loop_run(db, log, "retry-run", "retry", retry_of="proposal-run")
        await log.log(ConversationStarted(proposer="llm", parameter="gamma"), process_id="c-2")
        await _proposal(dbs, db, log, 0.95, "second-run")
        # Its answer lost: a reconciler adopts the run, for the conversation that proposed it.
        await log.log(ConversationStarted(proposer="random", parameter="gamma"), process_id="c-3")
        adopted = await _proposal(dbs, db, log, 0.93, None)
        await _loop_run(db, log, "rotation-run", "seed_rotation")
        await _loop_run(db, log, "seeding-again", "seeding", retry_of="never-recorded")
    written = _table(dbs)
    by_run = {row[0]: row for row in written}
    # (run_id, event_id, proposer, entry, purpose, retry_of, proposal_event_id, golden, conv.)
    assert by_run["seeding-run"][2:6] == ("ax3l", "seeding", "seeding", None)
    assert by_run["seeding-run"][7] is None  # no golden before the first
    proposal = by_run["proposal-run"]
    assert proposal[2:4] == ("tpe", "gamma") and proposal[6] == proposal[1]
    assert proposal[7:] == ("seeding-run", "c-1")
    retry = by_run["retry-run"]
    assert retry[2:6] == ("tpe", "gamma", "retry", "proposal-run")
    assert retry[6:] == proposal[6:]  # the original's proposal, golden and conversation
    assert by_run["second-run"][2] == "llm" and by_run["second-run"][8] == "c-2"
    assert by_run[adopted][2:4] == ("random", "gamma") and by_run[adopted][8] == "c-3"
    assert by_run["rotation-run"][2:5] == ("ax3l", "seed_rotation", "seed_rotation")
    assert by_run["rotation-run"][7] == "seeding-run"
    assert by_run["seeding-again"][2:6] == ("ax3l", "seeding", "seeding", "never-recorded")

    # The same history with its rows gone, as an older release left it: the back-fill gives
    # the same rows.
    dbs.query("DELETE FROM run_provenance")
    assert backfilled(dbs) == len(written)
    assert _table(dbs) == written
    assert backfilled(dbs) == 0  # once: every run has its row


async def test_a_failure_after_the_event_leaves_neither(snakelab_tables: TestDatabases) -> None:
    """The row is in the event's transaction: a failure before the commit leaves no event and
    no row; a run recorded again keeps its first row."""
    dbs = snakelab_tables
    async with Database(dbs.settings()) as db:
        log = EventLog(db)
        with pytest.raises(RuntimeError):
            await _loop_run(db, log, "run-x", "seeding", fail=True)
        assert dbs.query("SELECT COUNT(*) FROM events") == [(0,)]
        assert _table(dbs) == []
        first = await _loop_run(db, log, "run-x", "seeding")
        await _loop_run(db, log, "run-x", "confirmation")
    assert [(row[0], row[1], row[4]) for row in _table(dbs)] == [("run-x", first, "seeding")]
