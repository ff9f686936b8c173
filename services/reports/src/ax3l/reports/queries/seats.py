"""The seat leaderboard: outside agents (seats of the ``external`` proposer) counted like models.

Read from the orchestrator's ``seat_call`` and ``seat_call_refused`` events, whose
``source_name`` (and content ``seat``) names the seat. A turn is the checkpoint a submission
was made for. Per seat:

* ``turns_taken``: turns in which it submitted at least once;
* ``accepted_proposals``: its submissions the broker accepted (each won its turn);
* ``wasted_submissions``: the others, by kind (``wasted_kinds``): the broker's rejections
  (``invalid_value``, ``duplicate_config``), its protocol errors, and submissions refused at the
  endpoint (``no_turn``, ``turn_taken``, ``wrong_kind``, ``rate_limited``, ...);
* ``median_seconds_to_submission``: from the turn's opening to its accepted submission;
* ``new_goldens``: accepted runs that became the golden configuration.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from ax3l.reports.event_contents import parse
from ax3l.reports.models.proposers import SeatStats
from ax3l.shared.db.database import Database

SUBMIT_TOOLS = ("submit_single_value", "submit_pair_values")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _waste_kind(name: str, content: dict[str, Any]) -> str | None:
    """Why a submission was wasted, or None when it was accepted (or is not a submission)."""
    if content.get("tool") not in SUBMIT_TOOLS:
        return None
    if name == "seat_call_refused":
        return str(content.get("reason") or "refused")
    outcome = content.get("outcome")
    if outcome == "accepted":
        return None
    if outcome == "rejected":
        return str(content.get("code") or "rejected")
    return str(outcome or "error")


async def seat_stats(db: Database) -> list[SeatStats]:
    """One row per seat that has called the endpoint, most accepted proposals first."""
    rows = await db.fetchall(
        "SELECT e.event_id, e.name, e.source_name, m.content FROM events e"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id"
        " WHERE e.name IN ('seat_call', 'seat_call_refused') ORDER BY e.event_id",
        doing="reading the seats' calls",
    )
    if not rows:
        return []
    goldens = await db.fetchall(
        "SELECT m.content FROM events e JOIN event_messages m ON m.event_id = e.event_id"
        " WHERE e.name = 'golden_config_created'",
        doing="reading the golden configurations",
    )
    golden_runs = {
        content.get("run_id")
        for row in goldens
        if isinstance(content := parse(row["content"]), dict)
    }
    calls: dict[str, int] = defaultdict(int)
    refused: dict[str, int] = defaultdict(int)
    accepted: dict[str, int] = defaultdict(int)
    new_goldens: dict[str, int] = defaultdict(int)
    turns: dict[str, set[Any]] = defaultdict(set)
    seconds: dict[str, list[float]] = defaultdict(list)
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        content = parse(row["content"])
        content = content if isinstance(content, dict) else {}
        seat = row["source_name"] or content.get("seat")
        if not isinstance(seat, str) or not seat:
            continue  # a request without a valid token names no seat
        calls[seat] += 1
        if row["name"] == "seat_call_refused":
            refused[seat] += 1
        if content.get("tool") not in SUBMIT_TOOLS:
            continue
        checkpoint = content.get("checkpoint_event_id")
        if isinstance(checkpoint, int):
            turns[seat].add(checkpoint)
        kind = _waste_kind(row["name"], content)
        if kind is not None:
            kinds[seat][kind] += 1
            continue
        accepted[seat] += 1
        if content.get("run_id") in golden_runs:
            new_goldens[seat] += 1
        took = _number(content.get("seconds_since_turn_opened"))
        if took is not None:
            seconds[seat].append(took)
    stats = [
        SeatStats(
            seat=seat,
            calls=calls[seat],
            refused_calls=refused[seat],
            turns_taken=len(turns[seat]),
            accepted_proposals=accepted[seat],
            wasted_submissions=sum(kinds[seat].values()),
            wasted_kinds=dict(sorted(kinds[seat].items())),
            median_seconds_to_submission=statistics.median(seconds[seat])
            if seconds[seat]
            else None,
            new_goldens=new_goldens[seat],
        )
        for seat in calls
    ]
    return sorted(stats, key=lambda s: (-s.accepted_proposals, s.seat))
