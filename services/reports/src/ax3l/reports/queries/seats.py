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

from ax3l.reports.models.proposers import SeatStats
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import parse_message
from ax3l.shared.db.report_reads import event_texts
from ax3l.shared.event_models import GoldenConfigCreated, SeatCall, SeatCallRefused

SUBMIT_TOOLS = ("submit_single_value", "submit_pair_values")


def _waste_kind(call: SeatCall | SeatCallRefused) -> str | None:
    """Why a submission was wasted, or None when it was accepted (or is not a submission)."""
    if call.tool not in SUBMIT_TOOLS:
        return None
    if isinstance(call, SeatCallRefused):
        return str(call.reason or "refused")
    if call.outcome == "accepted":
        return None
    if call.outcome == "rejected":
        return str(call.code or "rejected")
    return str(call.outcome or "error")


SEAT_CALLS = (SeatCall.event, SeatCallRefused.event)
SEAT_CALLS_DOING = "reading the seats' calls"


async def seat_stats(db: Database) -> list[SeatStats]:
    """One row per seat that has called the endpoint, most accepted proposals first."""
    rows = await event_texts(db, SEAT_CALLS, doing=SEAT_CALLS_DOING)
    if not rows:
        return []
    goldens = await event_texts(
        db, (GoldenConfigCreated.event,), doing="reading the golden configurations"
    )
    golden = (GoldenConfigCreated.from_stored(parse_message(row["content"])) for row in goldens)
    golden_runs = {content.run_id for content in golden if content.run_id is not None}
    calls: dict[str, int] = defaultdict(int)
    refused: dict[str, int] = defaultdict(int)
    accepted: dict[str, int] = defaultdict(int)
    new_goldens: dict[str, int] = defaultdict(int)
    turns: dict[str, set[Any]] = defaultdict(set)
    seconds: dict[str, list[float]] = defaultdict(list)
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        model = SeatCallRefused if row["name"] == SeatCallRefused.event else SeatCall
        call = model.from_stored(parse_message(row["content"]))
        seat = row["source_name"] or call.seat
        if not seat:
            continue  # a request without a valid token names no seat
        calls[seat] += 1
        if isinstance(call, SeatCallRefused):
            refused[seat] += 1
        if call.tool not in SUBMIT_TOOLS:
            continue
        if call.checkpoint_event_id is not None:
            turns[seat].add(call.checkpoint_event_id)
        kind = _waste_kind(call)
        if kind is not None:
            kinds[seat][kind] += 1
            continue
        accepted[seat] += 1
        if isinstance(call, SeatCall) and call.run_id in golden_runs:
            new_goldens[seat] += 1
        if isinstance(call, SeatCall) and call.seconds_since_turn_opened is not None:
            seconds[seat].append(float(call.seconds_since_turn_opened))
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
