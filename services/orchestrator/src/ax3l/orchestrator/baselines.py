"""The runs of a baseline (seeding's defaults, a seed rotation's golden on the new seed), bounded.

A baseline run that ends without a high score (failed, cancelled, or ``completed`` without one)
is run again, but not for ever: after ``AX3L_BASELINE_MAX_ATTEMPTS`` such runs that trained, or
more than ``AX3L_INFRA_RETRY_MAX`` that SnakeLab failed before their first episode, the loop
stops with ``BaselineFailed`` naming the last run and its error. The attempts are SnakeLab's
stored runs of the configuration, so a restart counts the same. A stored run whose submission
was never recorded (a crash right after the submit) is recorded and waited for before anything
new is submitted; a new run goes through ``ax3l.shared.submit_once.OnceSubmitter``, which
never resends blindly.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ax3l.orchestrator.attempts import StoredRun, attempt_number, stored_runs, unrecorded_runs
from ax3l.orchestrator.services import Runs, StepFailed
from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.orchestrator.waiting import RunOutcome
from ax3l.shared.db import run_provenance
from ax3l.shared.db.event_reads import StoredEvent
from ax3l.shared.event_models import SimulationSubmitted
from ax3l.shared.snakelab_hosts import several_hosts_host
from ax3l.shared.submit_once import SubmissionRefused

logger = logging.getLogger(__name__)


class BaselineFailed(SubmissionRefused):
    """A seeding or seed-rotation baseline failed as often as the settings allow: like a refused
    configuration, this stops the loop, since no baseline means no comparison; the user acts."""


def _give_up_problem(runs: Runs, stored: list[StoredRun], what: str) -> str | None:
    """Why no further run of the baseline may be made, or None while the budget allows one."""
    if not stored or not all(run.ended_unscored for run in stored):
        return None  # nothing failed yet, or a run is still usable
    trained = [run for run in stored if not run.never_trained]
    never = [run for run in stored if run.never_trained]
    if len(trained) < runs.baseline_max_attempts and len(never) <= runs.infra_retry_max:
        return None
    last = stored[-1]
    return (
        f"the {what} run {last.run_id} ended {last.status}"
        f"{'' if last.high_score is None else f' with high score {last.high_score}'}"
        f": {last.error or 'no high score'}. Its configuration has run {len(stored)} times"
        f" without a high score ({len(trained)} after training, AX3L_BASELINE_MAX_ATTEMPTS="
        f"{runs.baseline_max_attempts}; {len(never)} failed by SnakeLab before the first"
        f" episode, AX3L_INFRA_RETRY_MAX={runs.infra_retry_max}). Find out why SnakeLab"
        " fails it (its log and simulation_runs.error_message), then raise the setting and"
        " restart the orchestrator"
    )


@dataclass(frozen=True)
class BaselineKind:
    """Seeding or a seed rotation: how its runs are recorded and where tests may crash it."""

    phase: Phase
    purpose: str  # simulation_submitted's purpose
    source_name: str
    crash_at: str  # its crash points are <crash_at>_after_submit and <crash_at>_waiting


async def scored_baseline(
    runs: Runs,
    status: LoopStatus,
    kind: BaselineKind,
    config: dict[str, Any],
    record: StoredEvent[SimulationSubmitted] | None,
    *,
    what: str,
    parent_event_id: int | None,
    alongside: Callable[[], Awaitable[None]] | None = None,
) -> tuple[str, RunOutcome]:
    """The baseline's run and how it ended with a high score: the recorded run (``record``, a
    usable one) or else the next one, waited for; ``StepFailed`` when it ends without a score.
    ``alongside`` submits the runs that may train beside it (a confirmation's), after the
    baseline's run is recorded and before it is waited for.
    """
    if record is None:
        run_id, record_id = await next_baseline_run(
            runs,
            config,
            what=what,
            purpose=kind.purpose,
            source_name=kind.source_name,
            parent_event_id=parent_event_id,
            crash_after_submit=f"{kind.crash_at}_after_submit",
        )
    else:
        run_id, record_id = str(record.process_id), record.event_id
    print(f"ax3l-orchestrator: {what} with run {run_id}", flush=True)
    status.set_phase(kind.phase, run_id=run_id)
    if alongside is not None:
        await alongside()
    return run_id, await wait_scored(runs, run_id, record_id, what, f"{kind.crash_at}_waiting")


async def wait_scored(
    runs: Runs, run_id: str, record_id: int, what: str, crash_at: str
) -> RunOutcome:
    """How the loop's own run ended, with a high score; ``StepFailed`` when it has none (the
    step is derived again, and the next attempt runs the configuration once more)."""
    outcome = await runs.waiter.wait(run_id, record_id, crash_at=crash_at)
    if not outcome.scored:
        raise StepFailed(f"the {what} run {run_id} ended {outcome.state}: {outcome.error}")
    return outcome


async def next_baseline_run(
    runs: Runs,
    config: dict[str, Any],
    *,
    what: str,
    purpose: str,
    source_name: str,
    parent_event_id: int | None,
    crash_after_submit: str,
) -> tuple[str, int]:
    """``(run_id, simulation_submitted event id)`` of the baseline run to wait for now, when
    no recorded run of this baseline is still usable."""
    stored = await stored_runs(runs.db, runs.index, config)
    lost = await unrecorded_runs(runs.db, stored)
    if lost:
        run_id, reused = lost[0].run_id, True
        logger.warning("%s: run %s was submitted but never recorded; recording it", what, run_id)
    else:
        problem = _give_up_problem(runs, stored, what)
        if problem:
            raise BaselineFailed(problem)
        run_id, submitted = await runs.submitter.reuse_or_submit(
            config, what, crash_after_submit=crash_after_submit
        )
        reused = not submitted
    earlier = [run for run in stored if run.run_id != run_id and run.ended_unscored]
    retry: dict[str, Any] = {}
    if earlier:
        retry = {
            "reason": "retry",
            "retry_of": earlier[-1].run_id,
            "infrastructure_failure": earlier[-1].never_trained,
        }
    record = SimulationSubmitted(
        run_id=run_id,
        config=config,
        purpose=purpose,
        reused=reused,
        attempt=attempt_number(stored, run_id),
        **retry,
        **_sent_to(runs, run_id),
    )
    async with runs.db.transaction("recording a baseline run") as cur:
        record_id = await runs.log.write(
            cur,
            record,
            level="WARNING" if earlier else None,
            process_id=run_id,
            parent_event_id=parent_event_id,
            source_name=source_name,
        )
        await run_provenance.write_loop_run(cur, run_id, record_id, purpose, retry.get("retry_of"))
    return run_id, record_id


def _sent_to(runs: Runs, run_id: str) -> dict[str, Any]:
    """``host``: the SnakeLab endpoint the run was sent to, with several hosts only."""
    host = several_hosts_host(runs.submitter.client, run_id)
    return {"host": host} if host else {}
