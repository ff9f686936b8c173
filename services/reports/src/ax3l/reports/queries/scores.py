"""The score histogram: how many SnakeLab runs reached each high score, and the seeds."""

from __future__ import annotations

from ax3l.reports.models.scores import ScoreBin, ScoreDistribution
from ax3l.shared.db.database import Database
from ax3l.shared.db.snakelab_reads import SnakeLabRuns


def summarise(bins: list[tuple[int, int]]) -> ScoreDistribution:
    """Summary figures of a histogram with one ``(score, runs)`` bin per score."""
    runs = sum(n for _, n in bins)
    found = [ScoreBin(score=score, runs=n) for score, n in bins]
    if runs == 0:
        return ScoreDistribution(bins=found, runs=0, mean=None, median=None, best=None, worst=None)
    mean = sum(score * n for score, n in bins) / runs

    def nth(k: int) -> int:
        seen = 0
        for score, n in bins:
            seen += n
            if seen > k:
                return score
        raise AssertionError("k beyond the histogram")

    median = nth(runs // 2) if runs % 2 else (nth(runs // 2 - 1) + nth(runs // 2)) / 2
    return ScoreDistribution(
        bins=found,
        runs=runs,
        mean=mean,
        median=float(median),
        best=bins[-1][0],
        worst=bins[0][0],
    )


async def score_distribution(
    db: Database, *, status: str | None, seed: int | None
) -> ScoreDistribution:
    """How many runs reached each high score (runs without a score yet are left out)."""
    return summarise(await SnakeLabRuns(db).score_counts(status, seed))


async def seeds(db: Database) -> list[int]:
    """The seeds SnakeLab has runs for."""
    return await SnakeLabRuns(db).seeds()
