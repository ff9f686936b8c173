"""Reading ``ax3l-compare``'s results (``comparisons``, ``comparison_repeats``) and summarising
them per proposer with ``ax3l.shared.comparison_stats``.

A database whose tables predate the comparison (the user's three tables only) simply has no
comparison: the report server never creates tables.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ax3l.shared import comparison_stats as stats
from ax3l.shared.db.database import Database

BASELINE = "random"


@dataclass(frozen=True)
class ComparisonRow:
    comparison_id: int
    started_at: datetime
    finished_at: datetime | None
    state: str
    proposers: list[str]
    repeats: int
    budget: int
    wall_seconds: float | None
    content: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RepeatRow:
    proposer: str
    repeat_index: int
    seed: int
    state: str
    runs: int
    best_score: int | None
    best_so_far: list[int | None]
    accepted_proposals: int
    model_turns: int
    wasted_turns: int
    wall_seconds: float
    wasted_kinds: dict[str, int] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class ProposerSummary:
    """One proposer's repeats of a comparison, summarised (finished repeats only)."""

    proposer: str
    repeats: int
    failed: int
    curve: list[stats.CurvePoint]
    final_median: float | None
    final_low: float | None
    final_high: float | None
    p_beats_random: float | None
    median_simulations_to_target: float | None
    reached_target: int
    accepted_proposals: int
    wasted_turns: int
    wasted_per_accepted: float | None
    wasted_kinds: dict[str, int]
    median_wall_seconds: float | None


async def _has_tables(db: Database) -> bool:
    row = await db.fetchone(
        "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = DATABASE()"
        " AND table_name IN ('comparisons', 'comparison_repeats')",
        doing="looking for the comparison tables",
    )
    return bool(row and int(row["n"]) == 2)


def _comparison(row: dict[str, Any]) -> ComparisonRow:
    content = _json(row["content"])
    return ComparisonRow(
        comparison_id=int(row["comparison_id"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        state=str(row["state"]),
        proposers=[p for p in str(row["proposers"]).split(",") if p],
        repeats=int(row["repeats"]),
        budget=int(row["budget"]),
        wall_seconds=None if row["wall_seconds"] is None else float(row["wall_seconds"]),
        content=content if isinstance(content, dict) else {},
    )


def _json(text: Any) -> Any:
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


async def list_comparisons(db: Database) -> list[ComparisonRow]:
    """Every comparison, newest first (empty without the tables)."""
    if not await _has_tables(db):
        return []
    rows = await db.fetchall(
        "SELECT comparison_id, started_at, finished_at, state, proposers, repeats, budget,"
        " wall_seconds, content FROM comparisons ORDER BY comparison_id DESC",
        doing="reading the comparisons",
    )
    return [_comparison(row) for row in rows]


async def read_repeats(db: Database, comparison_id: int) -> list[RepeatRow]:
    rows = await db.fetchall(
        "SELECT proposer, repeat_index, seed, state, runs, best_score, best_so_far,"
        " accepted_proposals, model_turns, wasted_turns, wall_seconds, content"
        " FROM comparison_repeats WHERE comparison_id = %s ORDER BY proposer, repeat_index",
        (comparison_id,),
        doing="reading a comparison's repeats",
    )
    repeats = []
    for row in rows:
        curve = _json(row["best_so_far"])
        content = _json(row["content"])
        content = content if isinstance(content, dict) else {}
        kinds = content.get("wasted_kinds")
        repeats.append(
            RepeatRow(
                proposer=str(row["proposer"]),
                repeat_index=int(row["repeat_index"]),
                seed=int(row["seed"]),
                state=str(row["state"]),
                runs=int(row["runs"]),
                best_score=None if row["best_score"] is None else int(row["best_score"]),
                best_so_far=[
                    v if isinstance(v, int) and not isinstance(v, bool) else None
                    for v in (curve if isinstance(curve, list) else [])
                ],
                accepted_proposals=int(row["accepted_proposals"]),
                model_turns=int(row["model_turns"]),
                wasted_turns=int(row["wasted_turns"]),
                wall_seconds=float(row["wall_seconds"]),
                wasted_kinds={str(k): int(v) for k, v in kinds.items()}
                if isinstance(kinds, dict)
                else {},
                error=content.get("error") if isinstance(content.get("error"), str) else None,
            )
        )
    return repeats


def default_target(comparison: ComparisonRow, repeats: list[RepeatRow]) -> float | None:
    """The score the page asks about unless the user picks one: ``random``'s median best at
    the budget (what beating the baseline means), else every proposer's; rounded up, as
    scores are whole numbers."""
    finished = [r for r in repeats if r.state == "finished"]
    pool = [r for r in finished if r.proposer == BASELINE] or finished
    finals = [
        float(v)
        for r in pool
        if (v := stats.final_best(r.best_so_far, comparison.budget)) is not None
    ]
    return float(math.ceil(stats.median(finals))) if finals else None


def summarise(
    comparison: ComparisonRow, repeats: list[RepeatRow], target: float | None
) -> list[ProposerSummary]:
    """Per proposer, in the comparison's order (then any other proposer found)."""
    budget = comparison.budget
    names = [*comparison.proposers]
    names += sorted({r.proposer for r in repeats} - set(names))
    finished = {n: [r for r in repeats if r.proposer == n and r.state == "finished"] for n in names}
    finals = {n: [stats.final_best(r.best_so_far, budget) for r in finished[n]] for n in names}
    summaries = []
    for name in names:
        mine = finished[name]
        curves = [r.best_so_far for r in mine]
        values = [float(v) for v in finals[name] if v is not None]
        accepted = sum(r.accepted_proposals for r in mine)
        wasted = sum(r.wasted_turns for r in mine)
        kinds: dict[str, int] = {}
        for r in mine:
            for kind, count in r.wasted_kinds.items():
                kinds[kind] = kinds.get(kind, 0) + count
        walls = [r.wall_seconds for r in mine]
        beats = (
            stats.probability_of_beating(finals[name], finals[BASELINE])
            if name != BASELINE and finished.get(BASELINE)
            else None
        )
        summaries.append(
            ProposerSummary(
                proposer=name,
                repeats=len(mine),
                failed=sum(1 for r in repeats if r.proposer == name and r.state != "finished"),
                curve=stats.curve_band(curves, budget),
                final_median=stats.median(values) if values else None,
                final_low=stats.quantile(values, 0.025) if values else None,
                final_high=stats.quantile(values, 0.975) if values else None,
                p_beats_random=beats,
                median_simulations_to_target=None
                if target is None
                else stats.median_simulations_to_reach(curves, target),
                reached_target=0
                if target is None
                else sum(1 for c in curves if stats.simulations_to_reach(c, target) is not None),
                accepted_proposals=accepted,
                wasted_turns=wasted,
                wasted_per_accepted=wasted / accepted if accepted else None,
                wasted_kinds=dict(sorted(kinds.items())),
                median_wall_seconds=stats.median(walls) if walls else None,
            )
        )
    return summaries
