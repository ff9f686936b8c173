"""SnakeLab runs: one run's summary, config, episodes and board; the score histogram."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ax3l.shared.config_schema import ConfigInvalid, ConfigSchema
from ax3l.shared.db.database import Database

RUN_FIELDS = (
    "r.id, r.run_id, r.project_version, r.config_hash, r.status, r.episode_count,"
    " r.high_score, r.created_at, r.started_at, r.completed_at, r.error_message,"
    " r.high_score_snapshot"
)


@dataclass
class Simulation:
    run: dict[str, Any]
    flat_config: dict[str, Any] | None
    config: dict[str, Any] | None
    snapshot: Any
    episodes: list[dict[str, Any]]
    events: list[dict[str, Any]]


def _snapshot(value: Any) -> Any:
    if value is None or isinstance(value, (dict, list)):
        return value
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return None


async def simulation(db: Database, schema: ConfigSchema, run_id: str) -> Simulation | None:
    """A run with its configuration, best-game snapshot, episodes and Ax3l events, or None."""
    run = await db.fetchone(
        f"SELECT {RUN_FIELDS} FROM {db.sl('simulation_runs')} r WHERE r.run_id = %s",
        (run_id,),
        doing=f"reading run {run_id}",
    )
    if run is None:
        return None
    flat = await db.fetchone(
        f"SELECT * FROM {db.sl('configurations')} WHERE run_id = %s",
        (run_id,),
        doing=f"reading the configuration of run {run_id}",
    )
    config = None
    if flat is not None:
        flat.pop("run_id", None)
        try:
            config = schema.unflatten(flat)
        except (KeyError, ConfigInvalid):
            config = None  # columns of another schema version: the flat view still shows them
    episodes = await db.fetchall(
        f"SELECT episode, score, steps, epsilon, loss FROM {db.sl('simulation_episodes')}"
        " WHERE run_id = %s ORDER BY episode",
        (run_id,),
        doing=f"reading the episodes of run {run_id}",
    )
    events = await db.fetchall(
        "SELECT e.event_id, e.occurred_at, e.name, e.category, e.log_level FROM events e"
        " WHERE e.process_id = %s ORDER BY e.event_id DESC LIMIT 200",
        (run_id,),
        doing=f"reading the events of run {run_id}",
    )
    snapshot = _snapshot(run.pop("high_score_snapshot"))
    return Simulation(run, flat, config, snapshot, episodes, events)


@dataclass(frozen=True)
class ScoreDistribution:
    """Run high scores as ``(score, runs)`` bins plus summary figures."""

    bins: list[tuple[int, int]]
    runs: int
    mean: float | None
    median: float | None
    best: int | None
    worst: int | None


def summarise(bins: list[tuple[int, int]]) -> ScoreDistribution:
    """Summary figures of a histogram with one bin per score."""
    runs = sum(n for _, n in bins)
    if runs == 0:
        return ScoreDistribution(bins, 0, None, None, None, None)
    mean = sum(score * n for score, n in bins) / runs

    def nth(k: int) -> int:
        seen = 0
        for score, n in bins:
            seen += n
            if seen > k:
                return score
        raise AssertionError("k beyond the histogram")

    median = nth(runs // 2) if runs % 2 else (nth(runs // 2 - 1) + nth(runs // 2)) / 2
    return ScoreDistribution(bins, runs, mean, float(median), bins[-1][0], bins[0][0])


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
