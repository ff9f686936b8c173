"""``SnakeLabRuns`` and the blocking reads of ``snakelab_reads`` on a real SnakeLab database:
three runs on two seeds written as SnakeLab writes them, each read checked against them."""

from __future__ import annotations

from contextlib import closing
from datetime import datetime, timedelta
from typing import Any

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db import snakelab_reads as reads
from ax3l.shared.db.database import Database
from ax3l.shared.db.tables import SIMULATION_EPISODES, insert
from ax3l.testing.databases import TestDatabases, create_snakelab_tables
from ax3l.testing.snakelab_rows import insert_runs

T0 = datetime(2026, 9, 15, 8, 0)


def _history(dbs: TestDatabases) -> list[str]:
    """Run 1 (seed 1) completed with 7 after 2 episodes; run 2 (seed 2) completed with 9 on
    host b; run 3 (seed 2) running with no score yet."""
    schema = cached_schema()
    configs = []
    for seed in (1, 2, 2):
        config = schema.default_config()
        config["seed"] = seed
        configs.append(config)
    ids = insert_runs(dbs, schema, *configs, status="running")
    finished = [(7, "a", 1), (9, "b", 2)]
    with closing(dbs.connect("snakelab", dbs.snakelab_db)) as conn, conn.cursor() as cur:
        for run_id, (score, host, minutes) in zip(ids, finished, strict=False):
            cur.execute(
                "UPDATE simulation_runs SET status = 'completed', high_score = %s, host = %s,"
                " started_at = %s, completed_at = %s WHERE run_id = %s",
                (score, host, T0, T0 + timedelta(minutes=minutes), run_id),
            )
        episodes = [
            {
                "run_id": ids[0],
                "episode": n,
                "score": s,
                "steps": 10 * n,
                "epsilon": 0.5,
                "loss": None,
            }
            for n, s in ((1, 3), (2, 7))
        ]
        cur.executemany(insert(SIMULATION_EPISODES, episodes[0]), episodes)
    return ids


async def test_the_reads_answer_from_snakelab_s_rows(snakelab_tables: TestDatabases) -> None:
    one, two, three = _history(snakelab_tables)
    async with Database(snakelab_tables.settings()) as db:
        runs = reads.SnakeLabRuns(db)
        await runs.ping()
        assert (await runs.run(one) or {})["high_score"] == 7
        assert await runs.run("no-such-run") is None
        assert (await runs.flat_config(two) or {})["seed"] == 2
        episodes = await runs.episodes(one, three)
        assert [e["score"] for e in episodes[one]] == [3, 7] and episodes[three] == []
        assert await runs.status(two) == ("completed", 9)
        assert await runs.status(three) == ("running", None)
        assert await runs.in_order(1, 5) == [(two, "completed"), (three, "running")]
        assert await runs.hosts([one, two]) == {"a": 1, "b": 1}
        assert [(run_id, took) for run_id, took, _ in await runs.durations(5)] == [
            (two, 120_000_000),
            (one, 60_000_000),
        ]
        assert await runs.mark() == (3, one)
        assert await runs.score_counts(None, None) == [(7, 1), (9, 1)]
        assert await runs.score_counts("completed", 1) == [(7, 1)]
        assert await runs.seeds() == [1, 2]
        newest = await runs.newest_id()
        assert newest is not None
        assert await runs.newest_and_first_open(0, ("completed",)) == (newest, newest)
        assert await runs.counts_by_status(0, None) == [("completed", 2), ("running", 1)]
        assert await runs.counts_by_status(0, newest - 1) == [("completed", 2)]
        assert await runs.position(three) == 3 and await runs.position("no-such-run") == 0
        assert await runs.seed_summaries() == [
            reads.SeedSummary(1, 1, 1, 7),
            reads.SeedSummary(2, 2, 1, 9),
        ]
        best: dict[str, Any] = await runs.best_of_newest_seed() or {}
        assert (best["run_id"], best["seed"], best["position"]) == (two, 2, 2)
        assert await runs.count() == 3
        async with db.transaction() as cur:
            assert await runs.count(cur) == 3
        run = await runs.with_config(cached_schema(), two) or {}
        assert (run["status"], run["config"]["seed"]) == ("completed", 2)
        assert await runs.with_config(cached_schema(), "no-such-run") is None
        assert [r["run_id"] for r in await runs.attempts([three, one])] == [one, three]
        assert await runs.newest_usable([one, two, three], ("running",)) == two
        assert await runs.newest_usable([three], ("running",)) is None
        matched = await runs.matching({"seed": 2}, ["seed"], doing="testing")
        assert [(r["run_id"], r["seed"]) for r in matched] == [(two, 2), (three, 2)]
        assert await runs.completed_scores([one, three]) == {one: 7}
        heads = await runs.heads(after=0, limit=2)
        assert [h["run_id"] for h in heads] == [one, two]
        assert [h["status"] for h in await runs.heads([heads[1]["id"]])] == ["completed"]
        lines = await runs.lines(["run_id", "seed", "high_score"], after=heads[0]["id"], limit=5)
        assert [r["line"] for r in lines] == [f"{two}\x1f2\x1f9", f"{three}\x1f2\x1f"]
        assert await runs.every_line(["run_id", "seed"], configurations=True) == [
            "\n".join(sorted([f"{one}\x1f1", f"{two}\x1f2", f"{three}\x1f2"]))
        ]


def test_the_blocking_reads_answer_from_snakelab_s_rows(databases: TestDatabases) -> None:
    with closing(databases.connect("ax3l")) as conn, conn.cursor() as cur:
        assert reads.run_count(cur, databases.snakelab_db) == 0  # SnakeLab made no tables yet
    create_snakelab_tables(databases)
    one, two, three = _history(databases)
    with closing(databases.connect("ax3l")) as conn, conn.cursor() as cur:
        db = databases.snakelab_db
        assert reads.run_count(cur, db) == 3
        assert reads.first_runs(cur, db, 2) == [(one, "completed", 7), (two, "completed", 9)]
        configured = reads.configured_runs(cur, db, 2)
        assert [(r["run_id"], r["seed"]) for r in configured] == [(one, 1), (two, 2)]
        every = reads.runs_with_configurations(cur, db)
        assert [(r["run_id"], (r["config"] or {}).get("seed")) for r in every] == [
            (one, 1),
            (two, 2),
            (three, 2),
        ]
        assert reads.episode_counts(cur, db) == {one: 2}
        assert reads.count_not_in(cur, db, ("completed",)) == 1
