"""The high-score series stays equal to the table while it grows, is wiped or recreated."""

from __future__ import annotations

from stored_rows import stored_rows

from ax3l.reports.queries.highscores import HighscoreReader
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.event_models import SimulationSubmitted


async def _golden(log: EventLog, sims: int, score: int, seed: int) -> int:
    return await log.log(
        "golden_config_created",
        {"run_id": f"run-{sims}", "reason": f"reason {sims}", "high_score": score},
        highscore=HighscoreRow(sims, score, seed),
    )


def _table(dbs) -> list[tuple[int, int, int, int]]:
    return stored_rows(
        dbs,
        "SELECT event_id, simulations, score, seed FROM experiment_highscores"
        " ORDER BY simulations, event_id",
    )


def _seen(points) -> list[tuple[int, int, int, int | None]]:
    return [(p.event_id, p.simulations, p.score, p.seed) for p in points]


async def test_reader_follows_growth_wipes_and_recreation(databases):
    """New rows appear, a wipe empties the series, recreated tables (reused ids) are re-read."""
    async with Database(databases.settings()) as db:
        log = EventLog(db)
        reader = HighscoreReader()
        assert await reader.points(db) == []
        for sims, score in ((1, 38), (5, 40), (9, 44)):
            await _golden(log, sims, score, 1970)
        first = await reader.points(db)
        assert _seen(first) == _table(databases)
        assert [(p.run_id, p.reason) for p in first] == [
            ("run-1", "reason 1"),
            ("run-5", "reason 5"),
            ("run-9", "reason 9"),
        ]
        await log.log(SimulationSubmitted(run_id="x"))
        await _golden(log, 12, 39, 1971)
        assert _seen(await reader.points(db)) == _table(databases)

        async with db.transaction() as cur:
            for table in ("experiment_highscores", "event_messages", "events"):
                await cur.execute(f"DELETE FROM {table}")
        assert await reader.points(db) == []

        # Recreated tables start ids again at 1: what was read for an id must not survive.
        async def recreate_with(sims: int, score: int, seed: int) -> list:
            async with db.transaction() as cur:
                for table in ("experiment_highscores", "event_messages", "events"):
                    await cur.execute(f"DELETE FROM {table}")
                await cur.execute("ALTER TABLE events AUTO_INCREMENT = 1")
            assert await _golden(log, sims, score, seed) == 1
            return await reader.points(db)

        assert _seen(await recreate_with(3, 41, 1980)) == [(1, 3, 41, 1980)]
        again = await recreate_with(4, 42, 1990)
        assert _seen(again) == [(1, 4, 42, 1990)] and again[0].run_id == "run-4"
