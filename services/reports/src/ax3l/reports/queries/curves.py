"""Learning curves: a run's score per episode (SnakeLab's ``simulation_episodes``), as a row's
small line and as the overlaid averages of runs compared side by side.

A row's line is ``SPARK_POINTS`` mean scores over equal stretches of its episodes, worked out by
MariaDB (the rows of 100 runs' 150,000 episodes never travel); a finished run's never changes,
so it is kept (``LearningCurves``, at most ``KEPT`` runs) and a page of finished runs costs no
statement after its first load.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from ax3l.reports.models.simulations import Episode
from ax3l.shared.db.database import Database
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.wire import TERMINAL_STATES

SPARK_POINTS = 30
KEPT = 20_000  # finished runs' lines kept (30 floats each: about 10 MB at most)


@dataclass(frozen=True)
class Sparkline:
    """A row's learning curve, drawn: the polyline's points and the averages it runs between."""

    points: str
    first: float
    last: float
    best: float


class LearningCurves:
    """Each run's small learning curve, finished runs' kept."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._done: OrderedDict[str, tuple[float, ...]] = OrderedDict()

    async def drawn(self, db: Database, runs: Sequence[tuple[str, str]]) -> dict[str, Sparkline]:
        """The lines of ``runs`` (``(run_id, status)``) drawn on one scale (the highest mean
        among them at the top), so that rows compare."""
        lines = await self.sparklines(db, runs)
        top = max((max(line) for line in lines.values() if line), default=0.0)
        return {
            run_id: Sparkline(sparkline_points(line, top), line[0], line[-1], max(line))
            for run_id, line in lines.items()
            if line
        }

    async def sparklines(
        self, db: Database, runs: Sequence[tuple[str, str]]
    ) -> dict[str, tuple[float, ...]]:
        """The line of each of ``runs`` (``(run_id, status)``) that has episodes."""
        found: dict[str, tuple[float, ...]] = {}
        missing = []
        for run_id, status in runs:
            if run_id in self._done:
                self._done.move_to_end(run_id)
                found[run_id] = self._done[run_id]
            else:
                missing.append((run_id, status))
        if not missing:
            return found
        ids = [run_id for run_id, _ in missing]
        lines = await SnakeLabRuns(db).mean_scores(ids, SPARK_POINTS)
        finished = {run_id for run_id, status in missing if status in TERMINAL_STATES}
        for run_id, line in lines.items():
            found[run_id] = tuple(line)
            if run_id in finished:
                self._done[run_id] = found[run_id]
        while len(self._done) > self.kept:
            self._done.popitem(last=False)
        return found


async def episodes_of(db: Database, run_ids: Sequence[str]) -> dict[str, list[Episode]]:
    """Every episode of each of ``run_ids`` (a few: a run page's, a comparison's)."""
    found = await SnakeLabRuns(db).episodes(*run_ids)
    return {run_id: [Episode.model_validate(e) for e in found[run_id]] for run_id in run_ids}


def sparkline_points(line: Sequence[float], top: float, width: int = 90, height: int = 22) -> str:
    """An SVG polyline's ``points`` for ``line`` scaled to ``top`` (the shown rows' highest)."""
    if not line:
        return ""
    step = width / max(len(line) - 1, 1)
    scale = (height - 2) / top if top > 0 else 0.0
    return " ".join(
        f"{i * step:.1f},{height - 1 - value * scale:.1f}" for i, value in enumerate(line)
    )
