"""The seat leaderboard on the Proposers page and in /api/proposers."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import RoundRobinCheckpoint, SeatCall, SeatCallRefused
from ax3l.shared.registry import PARAMETER_ORDER


async def _seat(
    log: EventLog,
    model: type[SeatCall | SeatCallRefused],
    seat: str,
    checkpoint: int | None,
    **content: Any,
) -> None:
    if checkpoint is not None:
        content["checkpoint_event_id"] = checkpoint
    await log.log(
        model.model_validate({"seat": seat, **content}),
        source_name=seat,
        process_id=str(uuid.uuid4()),
    )


async def _submitted(
    log: EventLog, seat: str, checkpoint: int, outcome: str, seconds: float, **more: Any
) -> None:
    """A seat's ``submit_single_value`` that reached the broker, ``seconds`` into the turn."""
    await _seat(
        log,
        SeatCall,
        seat,
        checkpoint,
        tool="submit_single_value",
        outcome=outcome,
        **more,
        seconds_since_turn_opened=seconds,
    )


async def test_seats_count_turns_accepted_wasted_seconds_and_goldens(snakelab_tables, make_client):
    """Per seat: turns it submitted in, accepted and wasted submissions by kind, the median
    seconds from a turn's opening to its accepted submission and new goldens; calls without a
    seat (a bad token) count for nobody."""
    run_1, run_2 = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"
    order = list(PARAMETER_ORDER)
    async with Database(snakelab_tables.settings()) as db:
        log = EventLog(db)
        first = await log.log(RoundRobinCheckpoint(parameter_order=order, index=0))
        await _seat(log, SeatCallRefused, "", None, tool=None, reason="unknown_token")
        await _seat(log, SeatCall, "alice", first, tool="current_turn", open=True)
        await _submitted(log, "alice", first, "rejected", 1.0, code="duplicate_config")
        await _submitted(log, "alice", first, "accepted", 3.0, run_id=run_1)
        await _seat(
            log,
            SeatCallRefused,
            "bob",
            first,
            tool="submit_single_value",
            reason="turn_taken",
        )
        await log.log("golden_config_created", {"run_id": run_1, "high_score": 47})
        second = await log.log(RoundRobinCheckpoint(parameter_order=order, index=1))
        await _seat(
            log,
            SeatCallRefused,
            "alice",
            second,
            tool="submit_pair_values",
            reason="wrong_kind",
        )
        await _submitted(log, "alice", second, "accepted", 7.0, run_id=run_2)
        await _seat(log, SeatCallRefused, "bob", None, tool="submit_single_value", reason="no_turn")

    async with make_client(snakelab_tables) as http:
        seats = {s["seat"]: s for s in (await http.get("/api/proposers")).json()["seats"]}
        assert set(seats) == {"alice", "bob"}
        alice, bob = seats["alice"], seats["bob"]
        assert (alice["turns_taken"], alice["accepted_proposals"], alice["new_goldens"]) == (
            2,
            2,
            1,
        )
        assert alice["wasted_kinds"] == {"duplicate_config": 1, "wrong_kind": 1}
        assert alice["median_seconds_to_submission"] == pytest.approx(5.0)
        assert (alice["calls"], alice["refused_calls"]) == (5, 1)
        assert (bob["turns_taken"], bob["accepted_proposals"], bob["wasted_submissions"]) == (
            1,
            0,
            2,
        )
        assert bob["wasted_kinds"] == {"no_turn": 1, "turn_taken": 1}
        assert bob["median_seconds_to_submission"] is None

        page = (await http.get("/proposers")).text
        row = page[page.index('data-seat="alice"') :].split("</tr>")[0]
        assert '<td class="num accepted">2</td>' in row
        assert "duplicate_config 1, wrong_kind 1" in row
        assert '<td class="num median-seconds">5.00</td>' in row
