"""Finishing an accepted proposal: wait for its run, compare, then promote or retain.

The comparison is stored before the decision is applied, and both are looked up before being
redone, so a restart between them applies the stored decision exactly once. A proposal wins
only with a strictly higher high score than the current golden configuration; under
``AX3L_PROMOTION=confirm`` or ``race`` such a run is first tried on more seeds beside the golden
(``ax3l.orchestrator.racing``), and promoted only when it wins there too.

Only a proposal of the latest checkpoint's turn is finished (``ax3l.shared.turn_state``): one
made for another turn is ignored. A run SnakeLab failed before its first episode does not
complete the step; ``infra_retry`` runs the configuration again and the step's run is then the
latest ``simulation_submitted`` child of the ``proposal_accepted`` event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ax3l.orchestrator.golden import create_golden
from ax3l.orchestrator.infra_retry import retry_never_trained
from ax3l.orchestrator.racing import (
    Candidate,
    Promotion,
    confirm,
    confirmed_golden_fields,
    started_for,
)
from ax3l.orchestrator.services import Runs
from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.orchestrator.waiting import RunOutcome
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import StoredEvent, latest
from ax3l.shared.db.reads import current_golden
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import (
    ConfigurationCompared,
    GoldenConfigCreated,
    GoldenConfigRetained,
    PromotionConfirmationDecided,
    ProposalAccepted,
    RoundRobinCheckpoint,
    SimulationSubmitted,
)
from ax3l.shared.registry import BY_NAME
from ax3l.shared.turn_state import latest_checkpoint, turn_proposals

logger = logging.getLogger(__name__)

DECISIONS = (GoldenConfigCreated.event, GoldenConfigRetained.event)


@dataclass(frozen=True)
class PendingProposal:
    """The turn's accepted proposal, not yet compared (``compared`` None) or not yet decided.

    ``run_id`` is the step's current run: the proposal's own, or its latest retry.
    """

    accepted: StoredEvent[ProposalAccepted]
    run_id: str
    compared: StoredEvent[ConfigurationCompared] | None
    checkpoint: StoredEvent[RoundRobinCheckpoint] | None = None


async def current_run(db: Database, accepted: StoredEvent[ProposalAccepted]) -> str | None:
    """The step's run: the latest ``simulation_submitted`` child of the proposal (a retry's,
    else the broker's), or the run the proposal names."""
    submitted = await latest(db, SimulationSubmitted, parent=accepted.event_id)
    if submitted is not None and isinstance(submitted.process_id, str):
        return submitted.process_id
    return accepted.model.run_id or accepted.process_id


async def pending_proposal(db: Database) -> PendingProposal | None:
    """The latest checkpoint's accepted proposal if its comparison or decision is unfinished.

    A proposal of another turn (one the broker adopted after that turn had moved on, or a second
    one for the same turn) is never finished here: it would complete a step it does not belong
    to. It is logged once per step attempt and otherwise left alone.
    """
    checkpoint = await latest_checkpoint(db)
    if checkpoint is None:
        return None
    proposals = await turn_proposals(db, checkpoint.event_id)
    if not proposals:
        return None
    accepted, extra = proposals[0], proposals[1:]
    for ignored in extra:
        logger.warning(
            "proposal_accepted event %s is a second proposal for checkpoint %s; ignored",
            ignored.event_id,
            checkpoint.event_id,
        )
    run_id = await current_run(db, accepted)
    if run_id is None:
        logger.warning("proposal_accepted event %s names no run; ignored", accepted.event_id)
        return None
    compared = await latest(db, ConfigurationCompared, process_id=run_id)
    if compared is None:
        return PendingProposal(accepted, run_id, None, checkpoint)
    if await latest(db, DECISIONS, parent=compared.event_id) is None:
        return PendingProposal(accepted, run_id, compared, checkpoint)
    return None


def comparison_reason(
    outcome: RunOutcome, golden: GoldenConfigCreated, changes: dict[str, list[Any]]
) -> str:
    """``High score: 41 > 40; training.gamma: 0.96 -> 0.97.`` (or why there is no score)."""
    if outcome.scored:
        assert outcome.high_score is not None
        score = outcome.high_score
        sign = ">" if score > golden.high_score else ("=" if score == golden.high_score else "<")
        head = f"High score: {score} {sign} {golden.high_score}"
    else:
        detail = f": {outcome.error}" if outcome.error else ""
        head = f"Run {outcome.state}{detail}; golden high score {golden.high_score} retained"
    change_text = ", ".join(f"{path}: {old!r} -> {new!r}" for path, (old, new) in changes.items())
    return f"{head}; {change_text or 'no change'}."


async def finish_proposal(
    runs: Runs, status: LoopStatus, promotion: Promotion, pending: PendingProposal
) -> None:
    """Wait, compare and decide for ``pending``; every part is skipped if already stored."""
    db, log = runs.db, runs.log
    accepted, run_id = pending.accepted, pending.run_id
    proposal, checkpoint = accepted.model, pending.checkpoint
    parameter = proposal.parameter or (checkpoint.parameter if checkpoint else None)
    index = checkpoint.model.index if checkpoint else None
    if index is None and parameter in BY_NAME:
        index = list(BY_NAME).index(parameter)
    compared = pending.compared
    if compared is None:
        status.set_phase(Phase.WAITING, run_id=run_id, parameter=parameter, index=index)
        submitted = await latest(db, SimulationSubmitted, process_id=run_id)
        parent = submitted.event_id if submitted else accepted.event_id
        outcome = await runs.waiter.wait(run_id, parent, crash_at="waiting")
        if await retry_never_trained(runs, accepted, outcome, parameter) is not None:
            status.run_id = None
            return  # the step goes on with the retry's run (the next step waits for it)
        status.set_phase(Phase.COMPARING)
        golden_event = await current_golden(db)
        assert golden_event is not None, "a proposal exists only after seeding"
        golden_event_id, golden = golden_event
        run_config = outcome.config or proposal.config or golden.config
        changes = runs.schema.changes(golden.config, run_config)
        won = outcome.scored and (outcome.high_score or 0) > golden.high_score
        confirmed: dict[str, Any] = {}
        if won and (promotion.trials or await started_for(db, run_id)):
            assert outcome.high_score is not None
            candidate = Candidate(
                run_id, run_config, outcome.high_score, outcome.event_id, parameter, index
            )
            decided = await confirm(runs, status, promotion, candidate, golden_event_id, golden)
            status.set_phase(Phase.COMPARING, confirmation=None)
            won = decided.model.decision == "promoted"
            confirmed = _confirmation_fields(decided.model)
        decision = "promoted" if won else ("retained" if outcome.scored else "failed")
        reason = comparison_reason(outcome, golden, changes)
        if confirmed:
            reason = f"{reason[:-1]}; {confirmed.pop('summary')}."
        compared_id = await log.log(
            ConfigurationCompared(
                golden_run_id=proposal.get("golden_run_id", golden.run_id),
                latest_run_id=run_id,
                current_golden_run_id=golden.run_id,
                reason=reason,
                parameter=parameter,
                index=index,
                high_score=outcome.high_score,
                golden_high_score=golden.high_score,
                seed=golden.seed,
                state=outcome.state,
                changes=changes,
                decision=decision,
                **_attempt_fields(accepted, run_id, outcome),
                **confirmed,
            ),
            level="INFO" if outcome.scored else "WARNING",
            process_id=run_id,
            parent_event_id=outcome.event_id,
            parameter=parameter,
        )
        crash_point("after_comparison")
        compared = await latest(db, ConfigurationCompared, process_id=run_id)
        assert compared is not None and compared.event_id == compared_id
    await _apply_decision(runs, status, compared, run_id, parameter)
    status.run_id = None


def _confirmation_fields(decided: PromotionConfirmationDecided) -> dict[str, Any]:
    """What the comparison carries of its trial, and a ``summary`` for its reason."""
    if decided.candidate_mean is None or decided.golden_mean is None:
        summary = f"not confirmed: {decided.problem or 'a confirmation run failed'}"
        return {"confirmation_problem": decided.problem, "summary": summary}
    seeds = ", ".join(str(seed) for seed in decided.seeds or ())
    fields: dict[str, Any] = {
        "candidate_mean": decided.candidate_mean,
        "golden_mean": decided.golden_mean,
    }
    if decided.policy == "race":
        verdict = "won its race" if decided.decision == "promoted" else "lost its race"
        p_value = "" if decided.p_value is None else f", p = {decided.p_value:.3g}"
        fields["summary"] = (
            f"{verdict} over seeds {seeds}: mean difference {decided.mean_difference:+g}"
            f"{p_value} (a win needs p <= {decided.threshold:.3g})"
        )
        return fields
    verdict = "confirmed" if decided.decision == "promoted" else "not confirmed"
    sign = ">" if decided.decision == "promoted" else "<="
    fields["summary"] = (
        f"{verdict} over seeds {seeds}: mean {decided.candidate_mean:g} {sign}"
        f" {decided.golden_mean:g}"
    )
    return fields


def _attempt_fields(
    accepted: StoredEvent[ProposalAccepted], run_id: str, outcome: RunOutcome
) -> dict[str, Any]:
    """For a step whose run is a retry: the proposal's own run, and whether nothing trained."""
    fields: dict[str, Any] = {}
    own = accepted.model.run_id or accepted.process_id
    if own != run_id:
        fields["proposal_run_id"] = own
    if outcome.never_trained:
        fields["never_trained"] = True
    return fields


async def _apply_decision(
    runs: Runs,
    status: LoopStatus,
    stored: StoredEvent[ConfigurationCompared],
    run_id: str,
    parameter: str | None,
) -> None:
    db, log = runs.db, runs.log
    compared = stored.model
    reason = str(compared.get("reason", ""))
    if compared.decision == "promoted":
        confirmed = await latest(db, PromotionConfirmationDecided, process_id=run_id)
        row = await SnakeLabRuns(db).with_config(runs.schema, run_id)
        if row is None:
            raise RuntimeError(f"run {run_id} won its comparison but SnakeLab no longer has it")
        assert compared.high_score is not None, f"promoted comparison {stored.event_id}"
        high_score = compared.high_score
        golden_id = await create_golden(
            db,
            log,
            run_id=run_id,
            config=row["config"],
            high_score=high_score,
            seed=int(row["config"]["seed"]),
            reason=reason,
            kind="promotion",
            parent_event_id=stored.event_id,
            parameter=parameter,
            extra={
                "parameter": parameter,
                "index": compared.index,
                "previous_run_id": compared.current_golden_run_id,
                "previous_high_score": compared.golden_high_score,
                **({} if confirmed is None else confirmed_golden_fields(confirmed.model)),
            },
        )
        status.set_phase(Phase.COMPARING, golden_run_id=run_id, golden_high_score=high_score)
        logger.info("new golden configuration %s (event %s): %s", run_id, golden_id, reason)
    else:
        failed = compared.decision == "failed"
        await log.log(
            GoldenConfigRetained(
                golden_run_id=compared.current_golden_run_id,
                run_id=run_id,
                reason=reason,
                parameter=parameter,
                index=compared.index,
            ),
            level="WARNING" if failed else "INFO",
            process_id=run_id,
            parent_event_id=stored.event_id,
            parameter=parameter,
        )
        logger.info("golden configuration retained: %s", reason)
