"""The score histogram: how many SnakeLab runs reached each high score, and the seeds."""

from __future__ import annotations

from typing import Any

from ax3l.reports.models.scores import ScoreBin, ScoreDistribution
from ax3l.shared.db.database import Database


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
    clauses = ["r.high_score IS NOT NULL"]
    args: list[Any] = []
    join = ""
    if status is not None:
        clauses.append("r.status = %s")
        args.append(status)
    if seed is not None:
        join = f" JOIN {db.sl('configurations')} c ON c.run_id = r.run_id"
        clauses.append("c.seed = %s")
        args.append(seed)
    rows = await db.fetchall(
        f"SELECT r.high_score AS score, COUNT(*) AS runs FROM {db.sl('simulation_runs')} r{join}"
        f" WHERE {' AND '.join(clauses)} GROUP BY r.high_score ORDER BY r.high_score",
        args,
        doing="reading the score distribution",
    )
    return summarise([(int(row["score"]), int(row["runs"])) for row in rows])


async def seeds(db: Database) -> list[int]:
    """The seeds SnakeLab has runs for."""
    rows = await db.fetchall(
        f"SELECT DISTINCT seed FROM {db.sl('configurations')} ORDER BY seed",
        doing="reading seeds",
    )
    return [int(row["seed"]) for row in rows]
