"""Where a comparison's results go: the ``comparisons`` and ``comparison_repeats`` tables of
Ax3l's database (``ax3l-db create`` makes them), and a CSV export of them.

The CSV has one line per repeat and run: ``comparison_id, proposer, repeat, seed, state,
simulations, score, best_so_far, accepted_proposals, model_turns, wasted_turns,
wall_seconds`` (``score`` the run's high score, empty when it has none; the repeat's columns
repeat on each of its lines), then ``row`` (``run``), and empty ``at_runs``, ``retest_seed``,
``run_id``, ``failed_run_ids``, ``expected_score``. Each held-out re-test adds a line with
``row`` ``retest``: ``at_runs`` (the recommendation re-tested is the one after that many
runs), ``retest_seed``, the counted ``run_id`` and its ``score``, the seed's failed runs
(space-separated) and the surrogate's ``expected_score`` of the recommendation;
``simulations`` and ``best_so_far`` are empty there. The last two columns are the repeat's
``promotions`` and ``confirmation_runs`` within the budget (``promotions.py``; empty for the
control arm), on each of its lines. ``proposer`` is the arm's name (``tpe@confirm``).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ax3l.compare.repeat import RepeatResult
from ax3l.shared.db import comparisons
from ax3l.shared.db.comparisons import NewRepeat, NewRetest

CSV_COLUMNS = (
    "comparison_id",
    "proposer",
    "repeat",
    "seed",
    "state",
    "simulations",
    "score",
    "best_so_far",
    "accepted_proposals",
    "model_turns",
    "wasted_turns",
    "wall_seconds",
    "row",
    "at_runs",
    "retest_seed",
    "run_id",
    "failed_run_ids",
    "expected_score",
    "promotions",
    "confirmation_runs",
)


def store_repeat(conn: Any, comparison_id: int, result: RepeatResult) -> None:
    """The repeat's row and its re-tests' rows (``conn`` is autocommit: a repeat is stored
    whole or, on a database error, partly; the comparison is then ``failed``)."""
    plan, turns = result.plan, result.turns
    repeat = NewRepeat(
        plan.proposer,
        plan.index,
        plan.seed,
        result.state,
        len(result.scores),
        result.best,
        result.curve,
        turns.accepted_proposals,
        turns.model_turns,
        turns.wasted_turns,
        result.wall_seconds,
        result.content(),
    )
    retests = [
        NewRetest(point.recommendation.at_runs, s.seed, s.run_id, s.score, s.failed_run_ids)
        for point in result.retests
        for s in point.seeds
    ]
    comparisons.add_repeat(conn, comparison_id, repeat, retests)


def export_csv(conn: Any, comparison_id: int, path: Path) -> int:
    """Write the comparison's repeats, one line per run and per re-test; returns the number of
    lines."""
    rows = comparisons.repeat_rows(conn, comparison_id)
    retests = comparisons.retest_rows(conn, comparison_id)
    lines = 0
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            key = [comparison_id, row["proposer"], row["repeat_index"], row["seed"], row["state"]]
            curve = json.loads(row["best_so_far"])
            content = json.loads(row["content"])
            scores = content.get("scores", [None] * len(curve))
            repeat = [
                row[k]
                for k in ("accepted_proposals", "model_turns", "wasted_turns", "wall_seconds")
            ]
            promotion = content.get("promotion") or {}
            figures = [
                _cell(promotion.get("promotions")),
                _cell(promotion.get("confirmation_runs")),
            ]
            if not curve:  # a repeat that failed before its first run still gets its line
                writer.writerow([*key, "", "", "", *repeat, "run", "", "", "", "", "", *figures])
                lines += 1
            for k, (score, best) in enumerate(zip(scores, curve, strict=False), start=1):
                writer.writerow(
                    [*key, k, _cell(score), _cell(best), *repeat, "run", "", "", "", "", "",
                     *figures]
                )  # fmt: skip
                lines += 1
            expected = {
                r.get("at_runs"): r.get("expected_score")
                for r in content.get("recommendations", [])
                if isinstance(r, dict)
            }
            for r in retests:
                if (r["proposer"], r["repeat_index"]) != (row["proposer"], row["repeat_index"]):
                    continue
                writer.writerow(
                    [*key, "", _cell(r["score"]), "", *repeat, "retest", r["at_runs"], r["seed"],
                     _cell(r["run_id"]), " ".join(json.loads(r["failed_run_ids"])),
                     _cell(expected.get(r["at_runs"])), *figures]
                )  # fmt: skip
                lines += 1
    return lines


def _cell(value: Any) -> Any:
    return "" if value is None else value


@dataclass(frozen=True)
class Truth:
    """A finished repeat's final recommendation judged three ways (surrogate only)."""

    proposer: str
    repeat: int
    best_observed: float
    held_out_mean: float
    expected_score: float


def ground_truth(conn: Any, comparison_id: int) -> list[Truth]:
    """Every finished repeat with a re-tested final recommendation and an expected score."""
    held_out = comparisons.held_out_means(conn, comparison_id)
    found = []
    for row in comparisons.finished_repeats(conn, comparison_id):
        proposer, index, best = row["proposer"], int(row["repeat_index"]), row["best_score"]
        picks = json.loads(row["content"]).get("recommendations", [])
        expected = [p.get("expected_score") for p in picks if p.get("at_runs") == row["budget"]]
        mean = held_out.get((proposer, index))
        if best is not None and mean is not None and expected and expected[0] is not None:
            found.append(Truth(proposer, index, float(best), mean, float(expected[0])))
    return found
