"""The /experiment-highscores series: experiment_highscores rows joined to their events."""

from __future__ import annotations

import asyncio
from datetime import datetime

from ax3l.reports.models.highscores import HighscorePoint, Highscores
from ax3l.reports.queries.experiment import golden_content
from ax3l.reports.queries.golden import confirmation
from ax3l.shared.db import report_reads
from ax3l.shared.db.database import Database
from ax3l.shared.db.snakelab_reads import SnakeLabRuns


class HighscoreReader:
    """Reads the series, keeping what it has read: rows are written once, with their event.

    Each request asks only how many rows there are and the newest id, and reads rows newer
    than those it holds. Fewer rows than expected (a wipe) or another history (the first
    event's id and time changed: recreated tables reuse ids) makes it read everything again.
    """

    def __init__(self) -> None:
        self._points: list[HighscorePoint] = []
        self._newest = 0
        self._history: tuple[int, datetime] | None = None
        self._lock = asyncio.Lock()

    async def points(self, db: Database) -> list[HighscorePoint]:
        """Every experiment_highscores row with its event's run and reason, acceptance order."""
        (count, newest), history = await asyncio.gather(
            report_reads.highscore_mark(db), report_reads.first_event(db)
        )
        async with self._lock:
            if history != self._history or newest < self._newest:
                self._points, self._newest, self._history = [], 0, history
            if newest > self._newest:
                self._add(await self._read(db, after=self._newest))
            if len(self._points) != count:
                self._points, self._newest = [], 0
                self._add(await self._read(db, after=0))
            return list(self._points)

    def _add(self, points: list[HighscorePoint]) -> None:
        if points:
            self._points = sorted(
                [*self._points, *points], key=lambda p: (p.simulations, p.event_id)
            )
            self._newest = max(self._newest, max(p.event_id for p in points))

    async def _read(self, db: Database, after: int) -> list[HighscorePoint]:
        points = []
        for row in await report_reads.highscore_rows(db, after):
            golden = golden_content(row)
            points.append(
                HighscorePoint(
                    event_id=int(row["event_id"]),
                    occurred_at=row["occurred_at"],
                    simulations=int(row["simulations"]),
                    score=int(row["score"]),
                    seed=None if row["seed"] is None else int(row["seed"]),
                    run_id=golden.run_id,
                    reason=golden.reason,
                    confirmation=confirmation(golden),
                    kind=golden.kind if isinstance(golden.kind, str) else None,
                )
            )
        return points


async def highscore_series(db: Database, reader: HighscoreReader) -> Highscores:
    """The points and SnakeLab's current run count (where the step line ends)."""
    points, current = await asyncio.gather(reader.points(db), SnakeLabRuns(db).count())
    return Highscores(points=points, current_simulations=current)
