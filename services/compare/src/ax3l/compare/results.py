"""Where a comparison's results go: the ``comparisons`` and ``comparison_repeats`` tables of
Ax3l's database (``ax3l-db create`` makes them), and a CSV export of them.

The CSV has one line per repeat and run: ``comparison_id, proposer, repeat, seed, state,
simulations, score, best_so_far, accepted_proposals, model_turns, wasted_turns,
wall_seconds`` (``score`` the run's high score, empty when it has none; the repeat's columns
repeat on each of its lines).
"""

from __future__ import annotations

import csv
import json
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


def finish_comparison(conn: Any, comparison_id: int, state: str, wall_seconds: float) -> None:
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE comparisons SET state = %s, finished_at = %s, wall_seconds = %s"
            " WHERE comparison_id = %s",
            (state, _now(), round(wall_seconds, 3), comparison_id),
        )


def export_csv(conn: Any, comparison_id: int, path: Path) -> int:
    """Write the comparison's repeats, one line per run; returns the number of lines."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT proposer, repeat_index, seed, state, best_so_far, accepted_proposals,"
            " model_turns, wasted_turns, wall_seconds, content FROM comparison_repeats"
            " WHERE comparison_id = %s ORDER BY proposer, repeat_index",
            (comparison_id,),
        )
        rows = cur.fetchall()
    lines = 0
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for proposer, index, seed, state, curve_text, accepted, turns, wasted, wall, text in rows:
            curve = json.loads(curve_text)
            scores = json.loads(text).get("scores", [None] * len(curve))
            if not curve:  # a repeat that failed before its first run still gets its line
                writer.writerow(
                    [comparison_id, proposer, index, seed, state, "", "", "",
                     accepted, turns, wasted, wall]
                )  # fmt: skip
                lines += 1
            for k, (score, best) in enumerate(zip(scores, curve, strict=False), start=1):
                writer.writerow(
                    [comparison_id, proposer, index, seed, state, k,
                     "" if score is None else score, "" if best is None else best,
                     accepted, turns, wasted, wall]
                )  # fmt: skip
                lines += 1
    return lines
