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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ax3l.compare.repeat import RepeatResult

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


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def create_comparison(
    conn: Any, proposers: list[str], repeats: int, budget: int, content: dict[str, Any]
) -> int:
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO comparisons (started_at, state, proposers, repeats, budget, content)"
            " VALUES (%s, 'running', %s, %s, %s, %s)",
            (_now(), ",".join(proposers), repeats, budget, json.dumps(content, sort_keys=True)),
        )
        return int(cur.lastrowid)


def store_repeat(conn: Any, comparison_id: int, result: RepeatResult) -> None:
    """The repeat's row and its re-tests' rows (``conn`` is autocommit: a repeat is stored
    whole or, on a database error, partly; the comparison is then ``failed``)."""
    plan = result.plan
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO comparison_repeats (comparison_id, proposer, repeat_index, seed, state,"
            " runs, best_score, best_so_far, accepted_proposals, model_turns, wasted_turns,"
            " wall_seconds, finished_at, content)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                comparison_id,
                plan.proposer,
                plan.index,
                plan.seed,
                result.state,
                len(result.scores),
                result.best,
                json.dumps(result.curve),
                result.turns.accepted_proposals,
                result.turns.model_turns,
                result.turns.wasted_turns,
                round(result.wall_seconds, 3),
                _now(),
                json.dumps(result.content(), sort_keys=True),
            ),
        )
        rows = [
            (
                comparison_id,
                plan.proposer,
                plan.index,
                point.recommendation.at_runs,
                seed.seed,
                seed.run_id,
                seed.score,
                json.dumps(seed.failed_run_ids),
            )
            for point in result.retests
            for seed in point.seeds
        ]
        if rows:
            cur.executemany(
                "INSERT INTO comparison_retests (comparison_id, proposer, repeat_index, at_runs,"
                " seed, run_id, score, failed_run_ids) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                rows,
            )


def finish_comparison(conn: Any, comparison_id: int, state: str, wall_seconds: float) -> None:
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE comparisons SET state = %s, finished_at = %s, wall_seconds = %s"
            " WHERE comparison_id = %s",
            (state, _now(), round(wall_seconds, 3), comparison_id),
        )


def export_csv(conn: Any, comparison_id: int, path: Path) -> int:
    """Write the comparison's repeats, one line per run and per re-test; returns the number of
    lines."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT proposer, repeat_index, seed, state, best_so_far, accepted_proposals,"
            " model_turns, wasted_turns, wall_seconds, content FROM comparison_repeats"
            " WHERE comparison_id = %s ORDER BY proposer, repeat_index",
            (comparison_id,),
        )
        rows = cur.fetchall()
        cur.execute(
            "SELECT proposer, repeat_index, at_runs, seed, run_id, score, failed_run_ids"
            " FROM comparison_retests WHERE comparison_id = %s"
            " ORDER BY proposer, repeat_index, at_runs, seed",
            (comparison_id,),
        )
        retests = cur.fetchall()
    lines = 0
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for proposer, index, seed, state, curve_text, accepted, turns, wasted, wall, text in rows:
            curve = json.loads(curve_text)
            content = json.loads(text)
            scores = content.get("scores", [None] * len(curve))
            repeat = [accepted, turns, wasted, wall]
            promotion = content.get("promotion") or {}
            figures = [
                _cell(promotion.get("promotions")),
                _cell(promotion.get("confirmation_runs")),
            ]
            if not curve:  # a repeat that failed before its first run still gets its line
                writer.writerow(
                    [comparison_id, proposer, index, seed, state, "", "", "", *repeat,
                     "run", "", "", "", "", "", *figures]
                )  # fmt: skip
                lines += 1
            for k, (score, best) in enumerate(zip(scores, curve, strict=False), start=1):
                writer.writerow(
                    [comparison_id, proposer, index, seed, state, k,
                     _cell(score), _cell(best), *repeat, "run", "", "", "", "", "", *figures]
                )  # fmt: skip
                lines += 1
            expected = {
                r.get("at_runs"): r.get("expected_score")
                for r in content.get("recommendations", [])
                if isinstance(r, dict)
            }
            for _, _, at_runs, retest_seed, run_id, score, failed in (
                r for r in retests if (r[0], r[1]) == (proposer, index)
            ):
                writer.writerow(
                    [comparison_id, proposer, index, seed, state, "", _cell(score), "",
                     *repeat, "retest", at_runs, retest_seed, _cell(run_id),
                     " ".join(json.loads(failed)), _cell(expected.get(at_runs)), *figures]
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
    with conn.cursor() as cur:
        cur.execute(
            "SELECT r.proposer, r.repeat_index, r.best_score, r.content, c.budget"
            " FROM comparison_repeats r JOIN comparisons c USING (comparison_id)"
            " WHERE r.comparison_id = %s AND r.state = 'finished'"
            " ORDER BY r.proposer, r.repeat_index",
            (comparison_id,),
        )
        repeats = cur.fetchall()
        cur.execute(
            "SELECT r.proposer, r.repeat_index, AVG(r.score) FROM comparison_retests r"
            " JOIN comparisons c USING (comparison_id) WHERE r.comparison_id = %s"
            " AND r.at_runs = c.budget AND r.score IS NOT NULL"
            " GROUP BY r.proposer, r.repeat_index",
            (comparison_id,),
        )
        held_out = {(p, int(i)): float(mean) for p, i, mean in cur.fetchall()}
    found = []
    for proposer, index, best, text, budget in repeats:
        picks = json.loads(text).get("recommendations", [])
        expected = [p.get("expected_score") for p in picks if p.get("at_runs") == budget]
        mean = held_out.get((proposer, int(index)))
        if best is not None and mean is not None and expected and expected[0] is not None:
            found.append(Truth(proposer, int(index), float(best), mean, float(expected[0])))
    return found
