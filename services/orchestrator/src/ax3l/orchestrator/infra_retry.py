"""A proposal's run that SnakeLab failed before its first episode is run again, as the same step.

Such a run tested nothing (SnakeLab could not store or start it, or restarted before the first
episode), so it does not complete the round-robin step: the proposal's configuration is
submitted again, at most ``AX3L_INFRA_RETRY_MAX`` times, and the new run becomes the step's run.
Each retry is a ``simulation_submitted`` event (level WARNING, ``source_name`` InfraRetry,
parent = the ``proposal_accepted`` event) with ``reason: "retry"``, ``retry_of`` (the failed
run) and ``attempt`` (2 for the first retry) in its content. Only when the budget is spent does
the last run complete the step as a failed comparison, like any other failed run.

This is the loop resubmitting its own step, not a new proposal: the broker's duplicate check
(every stored run counts, any status) stays as it is and never sees it. Retries count SnakeLab's
stored runs of the configuration, and a run submitted just before a crash but never recorded
becomes the retry on restart, so no attempt is ever submitted twice (``OnceSubmitter`` looks the
configuration up before each submit and never resends blindly).
"""

from __future__ import annotations

import logging
from typing import Any

from ax3l.orchestrator.attempts import attempt_number, stored_runs, unrecorded_runs
from ax3l.orchestrator.services import Runs
from ax3l.orchestrator.waiting import RunOutcome
from ax3l.shared.db import run_provenance
from ax3l.shared.db.event_reads import StoredEvent, select
from ax3l.shared.event_models import ProposalAccepted, SimulationSubmitted

logger = logging.getLogger(__name__)

SOURCE = "InfraRetry"


async def retry_never_trained(
    runs: Runs,
    accepted: StoredEvent[ProposalAccepted],
    outcome: RunOutcome,
    parameter: str | None,
) -> str | None:
    """Resubmit ``accepted``'s configuration if ``outcome`` tested nothing and the budget allows;
    returns the retry's run id (the step goes on with it), or None: the step completes."""
    if not outcome.never_trained:
        return None
    config: dict[str, Any] | None = accepted.model.config or outcome.config
    if not isinstance(config, dict):
        logger.warning("proposal %s has no configuration to retry", accepted.event_id)
        return None
    stored = await stored_runs(runs.db, runs.index, config)
    # A vanished run left no row, so the recorded retries count too.
    recorded = len(await select(runs.db, SimulationSubmitted, parent=accepted.event_id))
    made = max(len(stored) - 1, recorded - 1, 0)
    lost = [run for run in await unrecorded_runs(runs.db, stored) if run.run_id != outcome.run_id]
    if lost:
        run_id, reused = lost[0].run_id, True
        logger.warning("retry run %s was submitted but never recorded; recording it", run_id)
    else:
        if made >= runs.infra_retry_max:
            logger.warning(
                "run %s failed before its first episode (%s); %d retries made"
                " (AX3L_INFRA_RETRY_MAX=%d): the step completes as failed",
                outcome.run_id,
                outcome.error,
                made,
                runs.infra_retry_max,
            )
            return None
        # The failed run itself is no retry, even when its row is not terminal (a run failed
        # at the run deadline whose end SnakeLab could not store stays "running").
        run_id, submitted = await runs.submitter.reuse_or_submit(
            config,
            f"retry of run {outcome.run_id}",
            crash_after_submit="retry_after_submit",
            exclude={outcome.run_id},
        )
        reused = not submitted
    # A stored run's place among the configuration's runs; a new one follows every retry made.
    attempt = attempt_number(stored, run_id) if lost else made + 2
    record = SimulationSubmitted(
        run_id=run_id,
        config=config,
        purpose="retry",
        reason="retry",
        retry_of=outcome.run_id,
        attempt=attempt,
        proposal_event_id=accepted.event_id,
        proposal_run_id=accepted.model.run_id or accepted.process_id,
        failed_error=outcome.error,
        reused=reused,
    )
    async with runs.db.transaction("recording a retry") as cur:
        record_id = await runs.log.write(
            cur,
            record,
            level="WARNING",
            process_id=run_id,
            parent_event_id=accepted.event_id,
            source_name=SOURCE,
            parameter=parameter,
        )
        await run_provenance.write_loop_run(cur, run_id, record_id, "retry", outcome.run_id)
    logger.warning(
        "run %s failed before its first episode (%s): retrying the step as run %s (attempt %d)",
        outcome.run_id,
        outcome.error,
        run_id,
        attempt,
    )
    return run_id
