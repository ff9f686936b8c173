"""The comparisons' store on a real database: what ``ax3l-compare`` writes is what it and the
report server read back, in their order, and a database without the tables reads as empty."""

from __future__ import annotations

import json
from contextlib import closing

from ax3l.shared.db import comparisons as store
from ax3l.shared.db.comparisons import Comparisons, NewRepeat, NewRetest
from ax3l.shared.db.database import Database
from ax3l.testing.databases import TestDatabases


def _repeat(proposer: str, index: int, state: str, best: int | None) -> NewRepeat:
    content = {"recommendations": [{"at_runs": 3, "expected_score": 40.5}]}
    return NewRepeat(proposer, index, 1970 + index, state, 3, best, [None, best, best],
                     2, 1, 1, 1.23456, content)  # fmt: skip


async def test_written_rows_read_back_in_order(databases: TestDatabases) -> None:
    with closing(databases.connect("ax3l", databases.ax3l_db)) as conn:
        first = store.create_comparison(conn, ["tpe", "random"], 2, 3, {"b": 1, "a": 2})
        second = store.create_comparison(conn, ["tpe"], 1, 3, {})
        retests = [NewRetest(3, 9, "r9", 41, []), NewRetest(3, 8, None, None, ["f1", "f2"])]
        store.add_repeat(conn, first, _repeat("tpe", 1, "finished", 44), retests)
        store.add_repeat(conn, first, _repeat("random", 0, "failed", None), [])
        store.add_repeat(conn, first, _repeat("tpe", 0, "finished", 42), retests[:1])
        store.finish_comparison(conn, first, "partial", 12.34567)
        repeats = store.repeat_rows(conn, first)
        assert [(r["proposer"], r["repeat_index"]) for r in repeats] == [
            ("random", 0), ("tpe", 0), ("tpe", 1)
        ]  # fmt: skip
        assert repeats[2]["wall_seconds"] == 1.235
        assert repeats[2]["best_so_far"] == "[null, 44, 44]"
        retested = store.retest_rows(conn, first)
        assert [(r["repeat_index"], r["seed"], r["score"]) for r in retested] == [
            (0, 9, 41), (1, 8, None), (1, 9, 41)
        ]  # fmt: skip
        finished = store.finished_repeats(conn, first)
        assert [(r["proposer"], r["repeat_index"], r["budget"]) for r in finished] == [
            ("tpe", 0, 3), ("tpe", 1, 3)
        ]  # fmt: skip
        assert store.held_out_means(conn, first) == {("tpe", 0): 41.0, ("tpe", 1): 41.0}
    async with Database(databases.settings()) as db:
        read = Comparisons(db)
        found = await read.all()
        assert [(c["comparison_id"], c["state"], c["proposers"]) for c in found] == [
            (second, "running", "tpe"), (first, "partial", "tpe,random")
        ]  # fmt: skip
        assert found[1]["wall_seconds"] == 12.346 and found[1]["finished_at"] is not None
        assert json.loads(found[1]["content"]) == {"a": 2, "b": 1}
        assert [r["failed_run_ids"] for r in await read.retests(first)][1] == '["f1", "f2"]'
        assert len(await read.repeats(first)) == 3
        databases.query("DROP TABLE comparison_retests", database=databases.ax3l_db)
        assert await read.retests(first) == []
        databases.query("DROP TABLE comparison_repeats", database=databases.ax3l_db)
        assert await read.all() == []
