"""``ax3l-compare``'s held-out verdict, its wall time and where a repeat's time goes.

Runs one comparison on the private MariaDB (``.run/db.env``) and prints what ``ax3l-compare``
prints (the verdict table with IQM and intervals, the paired differences against ``default``
and ``tpe``, the optimism gap, then the observed-best table), then from the stored rows:
Spearman(held-out mean, expected score) and Spearman(best observed, expected score) over the
tuned repeats and over all of them, the median set-up, tuning and re-test seconds per repeat
and proposer, and the comparison's wall time. The default is the issue's full size, which
should take at most 2 minutes on 2 cores:

    uv run python bench/bench_compare.py            # default,random,tpe x 10 x 50, --retest 5
    uv run python bench/bench_compare.py --proposers llm,llm+tpe --repeats 2 --budget 14 \\
        --url http://127.0.0.1:27770                # the real-model tier (make llm-start)

Extra arguments after ``--`` go to ``ax3l-compare`` as they are (``-- --spawn exec``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pymysql

from ax3l.compare.results import ground_truth
from ax3l.compare.settings import effective_env, load_settings
from ax3l.shared import comparison_stats as stats
from ax3l.shared.db.cli import login_arguments

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--proposers", default="default,random,tpe")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--retest", type=int, default=5)
    parser.add_argument("--url")
    parser.add_argument("--db-env", type=Path, default=REPO / ".run" / "db.env")
    parser.add_argument("extra", nargs="*", help="more ax3l-compare arguments (after --)")
    args = parser.parse_args()
    command = [sys.executable, "-m", "ax3l.compare", "--db-env", str(args.db_env)]
    command += ["--proposers", args.proposers, "--repeats", str(args.repeats)]
    command += ["--budget", str(args.budget), "--retest", str(args.retest)]
    command += ["--url", args.url] if args.url else []
    command += args.extra
    began = time.monotonic()
    completed = subprocess.run(command, capture_output=True, text=True)
    wall = time.monotonic() - began
    print("$ " + " ".join(command[1:]))
    print("\n".join(line for line in completed.stdout.splitlines() if not line.startswith("[")))
    if completed.returncode != 0:
        print(completed.stderr, file=sys.stderr)
        return completed.returncode
    comparison_id = int(completed.stdout.split()[1].rstrip(":"))
    settings = load_settings(effective_env(args.db_env, {}))
    conn = pymysql.connect(**login_arguments(settings), database=settings.db_name)
    try:
        _correlations(conn, comparison_id)
        _time_per_repeat(conn, comparison_id)
    finally:
        conn.close()
    print(f"wall time of the bench's ax3l-compare: {wall:.1f} s")
    return 0


def _correlations(conn: object, comparison_id: int) -> None:
    found = ground_truth(conn, comparison_id)
    for what, rows in (
        ("the tuned repeats", [t for t in found if t.proposer != stats.CONTROL]),
        ("all the repeats", found),
    ):
        expected = [t.expected_score for t in rows]
        held_out = stats.spearman([t.held_out_mean for t in rows], expected)
        observed = stats.spearman([t.best_observed for t in rows], expected)
        print(
            f"Spearman with the expected score over {what} ({len(rows)}):"
            f" held-out mean {_figure(held_out)}, best observed {_figure(observed)}"
        )


def _time_per_repeat(conn: object, comparison_id: int) -> None:
    with conn.cursor() as cur:  # type: ignore[attr-defined]
        cur.execute(
            "SELECT proposer, wall_seconds, content FROM comparison_repeats"
            " WHERE comparison_id = %s AND state = 'finished'",
            (comparison_id,),
        )
        rows = cur.fetchall()
    by_proposer: dict[str, list[tuple[float, float, float]]] = {}
    for proposer, wall, text in rows:
        content = json.loads(text)
        by_proposer.setdefault(proposer, []).append(
            (content.get("setup_seconds", 0.0), float(wall), content.get("retest_seconds", 0.0))
        )
    print("median seconds per repeat: set-up (databases, services), tuning, re-tests")
    for proposer, times in by_proposer.items():
        setup, tuning, retest = (statistics.median(column) for column in zip(*times, strict=True))
        print(f"  {proposer:<10} {setup:6.2f} {tuning:7.2f} {retest:6.2f}")


def _figure(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())
