"""The single/pair submission workflow shared by both handlers, in the spec's order.

Golden configuration -> candidate changing only the assigned value(s) -> full schema
validation -> unchanged? -> stored already (any status, any version, all 26 columns, seed
included)? -> durable intent -> ``simulation.submit`` once (``ax3l.shared.submit_once``, 3 s,
never retried) ->
``proposal_accepted`` + ``simulation_submitted`` with the intent closed in one transaction.

A SnakeLab that answers late is normal weather. When it does not answer in time, the broker
waits (``AX3L_SUBMIT_SETTLE_WAIT``) for SnakeLab to answer again and settles the intent
(``ax3l.shared.db.intents.settle_own``): a run SnakeLab created is adopted and the reply is the
usual acceptance; a run known not to exist closes the intent and the reply says nothing was
submitted. Only when SnakeLab stays silent is the reply a ``handler_error`` saying the state is
unknown; the intent then stays pending and the orchestrator settles it before the turn is asked
again. Nothing is resent, and a broker held up between recording the intent and sending it
(``intents.SEND_WINDOW``) does not send at all.

Test hook: the crash point ``broker_after_submit`` (``AX3L_TEST_CRASH_AT``, see
``ax3l.shared.crash_points``) kills the broker right after SnakeLab accepted a run, before any
event is written, so tests can prove the run is adopted exactly once on restart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ax3l.shared import prompts_corrections
from ax3l.shared.canonical import configs_equal
from ax3l.shared.config_schema import ConfigInvalid, ConfigSchema
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db import intents
from ax3l.shared.db.config_index import ConfigIndex, IndexedRun
from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.db.reads import current_golden
from ax3l.shared.event_models import (
    GoldenConfigCreated,
    ProposalRejected,
    ProposalRejectedDuplicate,
    ProposalRejectedInvalid,
)
from ax3l.shared.registry import Entry
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.shared.snakelab_hosts import several_hosts_host
from ax3l.shared.submit_once import Refused, Sent, Unknown, send_once
from ax3l.shared.wire import SubmitReply, printable
from ax3l.toolbroker.results import Accepted, ProtocolFailure, Rejected
from ax3l.toolbroker.turn_gate import TurnGate
from ax3l.toolbroker.value_rules import shorten

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestContext:
    """Who is asking: the request's process id and its ``tool_request_received`` event."""

    process_id: str
    request_event_id: int
    source_name: str
    checkpoint_event_id: int | None = None  # the live turn, once ``enter_turn`` admitted it


@dataclass(frozen=True)
class _Candidate:
    """The golden configuration with a proposal's values, in the schema's types."""

    config: dict[str, Any]
    changes: dict[str, Any]  # config path -> value
    values: dict[str, Any]  # tool argument name -> value


def _values_text(entry: Entry, values: dict[str, Any]) -> str:
    pairs = [
        f"{path} = {printable(values[name])}"
        for path, name in zip(entry.paths, entry.value_names, strict=True)
    ]
    return " and ".join(pairs)


@dataclass(eq=False)
class SubmissionWorkflow:
    """Builds, checks and submits a candidate for one registry entry."""

    db: Database
    log: EventLog
    schema: ConfigSchema
    index: ConfigIndex
    snakelab: SnakeLabClient
    settle_wait: float = 8.0  # AX3L_SUBMIT_SETTLE_WAIT
    gate: TurnGate = field(init=False)

    def __post_init__(self) -> None:
        self.gate = TurnGate(self.db, self.schema, self.log, self.index)

    async def enter_turn(self, ctx: RequestContext, requested: str) -> RequestContext:
        """``ctx`` bound to the live turn when it is ``requested``'s; else ``TurnRefused``."""
        state = await self.gate.admit(requested)
        return replace(ctx, checkpoint_event_id=state.checkpoint_event_id)

    # -- rejections -----------------------------------------------------------------------

    async def reject_invalid(
        self,
        ctx: RequestContext,
        parameter: str | None,
        values: dict[str, Any],
        reason: str,
    ) -> Rejected:
        """An InvalidValue rejection (logged as ``proposal_rejected_invalid``)."""
        return await self._reject(
            ctx,
            "invalid_value",
            ProposalRejectedInvalid,
            prompts_corrections.INVALID_VALUE,
            prompts_corrections.invalid_value(reason),
            parameter,
            values,
            reason,
        )

    async def reject_duplicate(
        self,
        ctx: RequestContext,
        parameter: str,
        values: dict[str, Any],
        reason: str,
        run_ids: list[str],
    ) -> Rejected:
        """A NoDupes rejection (logged as ``proposal_rejected_duplicate``)."""
        return await self._reject(
            ctx,
            "duplicate_config",
            ProposalRejectedDuplicate,
            prompts_corrections.NO_DUPES,
            prompts_corrections.no_dupes(reason),
            parameter,
            values,
            reason,
            run_ids=run_ids,
        )

    async def _reject(
        self,
        ctx: RequestContext,
        code: Any,
        model: type[ProposalRejected],
        source_name: str,
        prompt: str,
        parameter: str | None,
        values: dict[str, Any],
        reason: str,
        **extra: Any,
    ) -> Rejected:
        # The dispatcher logs the event together with tool_execution_completed.
        turn: dict[str, Any] = {}
        if ctx.checkpoint_event_id is not None:
            turn["checkpoint_event_id"] = ctx.checkpoint_event_id
        content = model(
            parameter=parameter,
            values={name: printable(value) for name, value in values.items()},
            code=code,
            reason=reason,
            prompt=prompt,
            **extra,
            **turn,
        )
        return Rejected(
            code=code,
            reason=reason,
            prompt=prompt,
            source_name=source_name,
            parameter=parameter,
            content=content,
        )

    # -- the workflow ---------------------------------------------------------------------

    async def submit(
        self, ctx: RequestContext, entry: Entry, values: dict[str, int | float]
    ) -> Accepted | Rejected:
        """Candidate from the golden changing only ``values``; reject or submit it once."""
        # A run a crashed or timed-out submission left behind must count as stored before
        # this candidate is compared with the stored runs.
        await intents.reconcile(self.db, self.schema, self.log, index=self.index)
        golden_event_id, golden = await self._golden()
        candidate = await self._candidate(ctx, entry, values, golden)
        if isinstance(candidate, Rejected):
            return candidate
        duplicate = await self._duplicate(ctx, entry, candidate, golden)
        if duplicate is not None:
            return duplicate
        recorded_at = intents.now()
        intent_id = await self._record_intent(
            ctx, entry, candidate, golden_event_id, golden, recorded_at
        )
        if not intents.may_send(recorded_at):
            await intents.abandon_unsent(self.db, intent_id)
            raise ProtocolFailure(
                "handler_error",
                f"the submission was not sent: {intents.SEND_WINDOW:g} s passed between"
                f" recording it (submission intent {intent_id}) and sending it; nothing was"
                " submitted",
            )
        reply = await self._send(ctx, entry, candidate, intent_id)
        if isinstance(reply, Accepted | Rejected):
            return reply
        crash_point("broker_after_submit")
        return await self._complete(intent_id, reply)

    async def _golden(self) -> tuple[int, GoldenConfigCreated]:
        found = await current_golden(self.db)
        if found is None:
            raise ProtocolFailure(
                "handler_error",
                "there is no golden configuration yet: the orchestrator seeds the experiment"
                " with SnakeLab's default configuration first; try again once it exists",
            )
        return found

    async def _candidate(
        self,
        ctx: RequestContext,
        entry: Entry,
        values: dict[str, int | float],
        golden: GoldenConfigCreated,
    ) -> _Candidate | Rejected:
        """The golden configuration with ``values``, validated (an InvalidValue rejection when
        the values break the schema)."""
        changes = {
            path: values[name] for path, name in zip(entry.paths, entry.value_names, strict=True)
        }
        try:
            candidate = self.schema.with_values(golden.config, changes)
        except (KeyError, TypeError) as exc:
            raise ProtocolFailure(
                "handler_error",
                f"the golden configuration (run {golden.run_id}) has no setting {exc}",
            ) from None
        try:
            candidate = self.schema.validate(candidate)
        except ConfigInvalid as exc:
            own = [e for e in exc.errors if any(e.startswith(f"$.{p}") for p in entry.paths)]
            if not own:
                # Nothing the model chose is wrong: the golden itself breaks the schema (for
                # example a schema file that changed); the host must sort that out.
                raise ProtocolFailure(
                    "handler_error",
                    f"the golden configuration (run {golden.run_id}) breaks the schema: "
                    + "; ".join(shorten(error) for error in exc.errors[:3]),
                ) from None
            reason = "; ".join(shorten(error) for error in own[:5])
            return await self.reject_invalid(ctx, entry.name, values, reason)
        # The schema's types win: 64.0 for an integer setting is submitted as 64.
        changes = {path: self.schema.get(candidate, path) for path in entry.paths}
        accepted_values = {
            name: changes[path] for path, name in zip(entry.paths, entry.value_names, strict=True)
        }
        return _Candidate(candidate, changes, accepted_values)

    async def _duplicate(
        self, ctx: RequestContext, entry: Entry, candidate: _Candidate, golden: GoldenConfigCreated
    ) -> Rejected | None:
        """A NoDupes rejection when the candidate is the golden or already stored, else None."""
        if configs_equal(self.schema, candidate.config, golden.config):
            reason = (
                f"{_values_text(entry, candidate.values)} is what the golden configuration"
                f" (run {golden.run_id}) already uses, so the proposal changes nothing"
            )
            return await self.reject_duplicate(
                ctx, entry.name, candidate.values, reason, [golden.run_id]
            )
        stored = await self.index.find_indexed(candidate.config)
        if stored:
            reason = _duplicate_reason(entry, candidate.values, stored)
            run_ids = [run.run_id for run in stored]
            return await self.reject_duplicate(ctx, entry.name, candidate.values, reason, run_ids)
        return None

    async def _record_intent(
        self,
        ctx: RequestContext,
        entry: Entry,
        candidate: _Candidate,
        golden_event_id: int,
        golden: GoldenConfigCreated,
        recorded_at: datetime,
    ) -> int:
        return await intents.record_intent(
            self.db,
            entry=entry.name,
            config=candidate.config,
            values=candidate.values,
            changes=candidate.changes,
            fingerprint=self.index.fingerprint(candidate.config),
            golden_run_id=golden.run_id,
            golden_event_id=golden_event_id,
            after_id=await self.index.position(),
            request_event_id=ctx.request_event_id,
            source_name=ctx.source_name,
            checkpoint_event_id=ctx.checkpoint_event_id,
            created_at=recorded_at,
        )

    async def _send(
        self, ctx: RequestContext, entry: Entry, candidate: _Candidate, intent_id: int
    ) -> SubmitReply | Accepted | Rejected:
        """``simulation.submit`` once; SnakeLab's refusal of the config is an InvalidValue, and
        a late answer is settled (``_settle``)."""
        outcome = await send_once(self.snakelab, candidate.config)
        if isinstance(outcome, Sent):
            return outcome.reply
        if isinstance(outcome, Refused):
            exc = outcome.error
            await intents.refuse_intent(self.db, intent_id)
            if exc.code == "invalid_config":
                reason = f"SnakeLab refused the configuration: {shorten(exc.message)}"
                return await self.reject_invalid(ctx, entry.name, candidate.values, reason)
            raise ProtocolFailure(
                "handler_error",
                f"SnakeLab refused the submission ({exc.code}: {shorten(exc.message)});"
                " it was not retried",
            )
        return await self._settle(intent_id, outcome)

    async def _settle(self, intent_id: int, outcome: Unknown) -> Accepted:
        """SnakeLab did not answer the submit: wait for it to answer again, then take the run it
        created (the turn's accepted proposal), or report that none exists."""
        settled = await intents.settle_own(
            self.db,
            self.schema,
            self.log,
            self.snakelab,
            intent_id,
            index=self.index,
            wait_up_to=self.settle_wait,
        )
        if settled is not None and settled.state in (intents.ADOPTED, intents.DONE):
            assert settled.run_id is not None  # both states name the run
            return Accepted(run_id=settled.run_id)
        if settled is not None and settled.state == intents.ABANDONED:
            raise ProtocolFailure(
                "handler_error",
                f"{outcome.problem}; SnakeLab answered again and has no run of this"
                f" configuration, so nothing was submitted (submission intent {intent_id}"
                " closed); it was not retried",
            )
        raise ProtocolFailure(
            "handler_error",
            f"{outcome.problem}, nor in the {self.settle_wait:g} s after. The submission state"
            " is unknown: it was not retried; the turn is not asked again until the orchestrator"
            f" has settled it (submission intent {intent_id})",
        )

    async def _complete(self, intent_id: int, reply: SubmitReply) -> Accepted:
        """Write the accepted run's events and close its intent."""
        try:
            recorded = await intents.complete_intent(
                self.db,
                self.log,
                intent_id,
                reply.run_id,
                reply.queue_position,
                host=several_hosts_host(self.snakelab, reply.run_id),
            )
        except DatabaseError as exc:
            raise ProtocolFailure(
                "handler_error",
                f"SnakeLab accepted run {reply.run_id} but its events could not be written"
                f" ({exc}); reconciliation adopts it (submission intent {intent_id})",
            ) from None
        return Accepted(run_id=recorded.run_id)


def _duplicate_reason(entry: Entry, values: dict[str, Any], stored: list[IndexedRun]) -> str:
    first = stored[0]
    more = f" and {len(stored) - 1} more" if len(stored) > 1 else ""
    return (
        f"the golden configuration with {_values_text(entry, values)} has already been run"
        f" with the same seed (run {first.run_id}, status {first.status or 'unknown'}{more})"
    )
