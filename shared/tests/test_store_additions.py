"""The store's reads for ``ax3l-compare``'s blocking cursor, the alert watcher's start, the
table check and the throwaway databases, on a real MariaDB."""

from __future__ import annotations

import secrets
from contextlib import closing

from ax3l.shared.db import event_reads
from ax3l.shared.db.cli import create_databases, database_names, drop_databases
from ax3l.shared.db.database import Database, tables_present
from ax3l.shared.db.event_log import EventLog
from ax3l.testing.databases import TestDatabases


async def test_event_reads_on_a_blocking_cursor_and_the_newest_id(
    snakelab_tables: TestDatabases,
) -> None:
    dbs = snakelab_tables
    async with Database(dbs.settings()) as db:
        assert await event_reads.newest_id(db, doing="reading events") is None
        log = EventLog(db)
        ids = [
            await log.log("prompt_sent", "advice", source_name="tpe", process_id="c1"),
            await log.log("prompt_sent", "chat", source_name="llm", process_id="run-1"),
            await log.log("reply_received", {"text": "x"}, source_name="llm", process_id="run-1"),
            await log.log("round_robin_checkpoint", {"n": 1}),
            await log.log("round_robin_checkpoint", {"n": 2}),
        ]
        assert await event_reads.newest_id(db, doing="reading events") == ids[-1]
        assert await event_reads.newest_id(db, "reply_received", doing="x") == ids[2]
        assert await event_reads.newest_id(db, "alert_sent", doing="x") is None
        picked = await event_reads.select(db, "round_robin_checkpoint", doing="looking")
        assert [e.content for e in picked] == [{"n": 1}, {"n": 2}]
        assert await tables_present(db, ("events", "seats"), "looking")
        assert not await tables_present(db, ("events", "no_such_table"), "looking")
        assert await tables_present(db, ("simulation_runs",), "looking", dbs.snakelab_db)
    with closing(dbs.connect("ax3l", dbs.ax3l_db)) as conn, conn.cursor() as cur:
        after = event_reads.first_event_id(cur, "run-1")
        assert after == ids[1] and event_reads.first_event_id(cur, "run-9") is None
        found = event_reads.select_on(cur, "round_robin_checkpoint", after=after, oldest=1)
        assert [(e.event_id, e.content) for e in found] == [(ids[3], {"n": 1})]
        rows = event_reads.turn_rows(cur, ["prompt_sent", "reply_received"], "tpe", ids[2])
        assert [(r[0], r[2], r[3], r[4]) for r in rows] == [
            ("prompt_sent", "tpe", "advice", "c1"),
            ("reply_received", "llm", None, "run-1"),
        ]


def test_throwaway_databases_are_created_granted_and_dropped(databases: TestDatabases) -> None:
    names = [f"ax3l_t{secrets.token_hex(4)}", f"snakelab_t{secrets.token_hex(4)}"]
    grants = [("SELECT", names[1], databases.ax3l_user)]
    with closing(databases.connect()) as conn, conn.cursor() as cur:
        try:
            create_databases(cur, names, grants)
            assert set(names) <= database_names(cur)
            cur.execute("SHOW GRANTS FOR %s@'%%'", (databases.ax3l_user,))
            assert any(names[1] in row[0] for row in cur.fetchall())
        finally:
            drop_databases(cur, names, grants)
        assert not set(names) & database_names(cur)
        cur.execute("SHOW GRANTS FOR %s@'%%'", (databases.ax3l_user,))
        assert not any(names[1] in row[0] for row in cur.fetchall())
