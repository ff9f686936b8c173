"""The status bar's content: SnakeLab's latest poll, the orchestrator's, and the experiment."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from ax3l.reports.models.status import ConfirmationOut, OrchestratorOut, SnakeLabOut, StatusOut
from ax3l.reports.orchestrator_status import OrchestratorMonitor, OrchestratorPoll, epoch_time
from ax3l.reports.queries.experiment import experiment_state
from ax3l.reports.snakelab_status import SnakeLabMonitor
from ax3l.shared.cycles import CycleTracker
from ax3l.shared.db.database import Database

ORCHESTRATOR_LABELS = {"unavailable": "Unavailable", "unknown": "Checking the orchestrator…"}


def _str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def _int(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def orchestrator_out(poll: OrchestratorPoll, now: datetime) -> OrchestratorOut:
    """The status bar's loop part from one poll; missing or odd fields are left out."""
    data = poll.data if poll.state == "up" else {}
    phase = _str(data, "phase")
    last_error_at = epoch_time(data.get("last_error_at"))
    disk_full = _str(data, "disk_full")
    if poll.state == "up":
        label = "Disk full" if disk_full else (phase or "running").capitalize()
    else:
        label = ORCHESTRATOR_LABELS[poll.state]
    return OrchestratorOut(
        state=poll.state,
        label=label,
        checked_at=poll.checked_at,
        unavailable_since=poll.unavailable_since,
        detail=poll.detail,
        phase=phase,
        parameter=_str(data, "parameter"),
        index=_int(data, "index"),
        proposer=_str(data, "proposer"),
        conversation_id=_str(data, "conversation_id"),
        run_id=_str(data, "run_id"),
        failure_streak=_int(data, "failure_streak"),
        fallback_proposer=_str(data, "fallback_proposer"),
        llm_fallback_after=_int(data, "llm_fallback_after"),
        last_error=_str(data, "last_error"),
        last_error_at=last_error_at,
        last_error_seconds_ago=None
        if last_error_at is None
        else max(0.0, (now - last_error_at).total_seconds()),
        backoff_until=epoch_time(data.get("backoff_until")),
        stop_reason=_str(data, "stop_reason"),
        promotion=_str(data, "promotion"),
        confirmation=_confirmation(data.get("confirmation")),
        snakelab_hosts=_hosts(data.get("snakelab_hosts")),
        disk_full=disk_full,
    )


HOST_STATES = frozenset({"idle", "running", "down", "unknown"})


def _confirmation(value: Any) -> ConfirmationOut | None:
    """The confirmation in progress, if the orchestrator sent a readable one."""
    if not isinstance(value, dict):
        return None
    candidate, golden, seeds = (
        value.get(k) for k in ("candidate_run_id", "golden_run_id", "seeds")
    )
    if not isinstance(candidate, str) or not isinstance(seeds, list):
        return None
    whole = [seed for seed in seeds if isinstance(seed, int) and not isinstance(seed, bool)]
    return ConfirmationOut(
        candidate_run_id=candidate,
        golden_run_id=golden if isinstance(golden, str) else None,
        seeds=whole,
    )


def _hosts(value: Any) -> dict[str, str] | None:
    """Each SnakeLab host's state; entries that are not an endpoint and a known state go."""
    if not isinstance(value, dict):
        return None
    hosts = {
        endpoint: state
        for endpoint, state in value.items()
        if isinstance(endpoint, str) and state in HOST_STATES
    }
    return hosts or None


async def _orchestrator_poll(
    orchestrator: OrchestratorMonitor | None, wait: float
) -> OrchestratorPoll:
    if orchestrator is None:
        return OrchestratorPoll("unknown", None)
    return await orchestrator.current(wait)


async def build_status(
    db: Database,
    monitor: SnakeLabMonitor,
    cycles: CycleTracker,
    wait: float,
    orchestrator: OrchestratorMonitor | None = None,
) -> StatusOut:
    """Everything the status bar shows; the two polls never wait longer than ``wait``."""
    snakelab, loop, state = await asyncio.gather(
        monitor.current(wait), _orchestrator_poll(orchestrator, wait), experiment_state(db, cycles)
    )
    run = snakelab.run
    golden = state.golden
    count = state.cycles
    current_parameter = None
    if count.order is not None and count.index is not None:
        current_parameter = count.order[count.index]
    now = datetime.now(UTC).replace(tzinfo=None)
    loop_out = orchestrator_out(loop, now)
    # One entry for every card: the polled status lags the database by up to a poll, and two
    # cards naming different entries read as a contradiction.
    turn = loop_out.parameter if loop_out.state == "up" and loop_out.parameter else None
    return StatusOut(
        snakelab=SnakeLabOut(
            state=snakelab.state,
            label=snakelab.label,
            checked_at=snakelab.checked_at,
            detail=snakelab.detail,
            run_id=run.run_id if run else None,
            run_state=run.state if run else None,
            completed_epochs=run.completed_epochs if run else None,
            epochs=run.epochs if run else None,
            high_score=run.high_score if run else None,
        ),
        orchestrator=loop_out,
        golden=golden,
        golden_high_score=golden.high_score if golden else None,
        all_time_high_score=state.all_time_high_score,
        simulations_submitted=state.simulations,
        experiment_cycles=count.complete,
        stagnant_cycles=count.stagnant,
        cycle_progress=count.progress,
        current_parameter=current_parameter,
        turn=turn or current_parameter,
        current_seed=golden.seed if golden else None,
        refreshed_at=now,
    )
