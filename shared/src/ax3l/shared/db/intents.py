"""Durable submission intents: a run SnakeLab accepted never ends up without its events.

Exactly once across crashes works like this:

1. Before ``simulation.submit`` the broker commits an intent (state ``pending``): the
   configuration, its fingerprint, the entry and values, the golden it was built from, and
   the config index position (every run with a higher SnakeLab id is newer than the check),
   and the conversation proposing it (the latest ``conversation_started``: its proposer and
   process id, ``ax3l.shared.db.run_provenance``).
2. When SnakeLab answers, ``complete_intent`` writes ``proposal_accepted`` and then
   ``simulation_submitted`` (its child) and the run's ``run_provenance`` row, and marks the
   intent ``done``, in one transaction.
3. If the process dies in between, or SnakeLab's answer never arrives, the intent stays
   pending. ``reconcile`` looks the run up by its configuration among runs newer than the
   recorded position (``ax3l.shared.submit_once.created_runs``, the lookup the orchestrator's
   own submissions use too); if SnakeLab created it, the same two events are written once,
   marked ``"adopted": true``, and the intent becomes ``adopted``.

A late answer is normal weather (a SnakeLab that read the submit and then stalled for seconds
still creates the run), so an intent is never given up for its age alone. It is *settled*:

* The broker sends an intent's submit only within ``SEND_WINDOW`` seconds of recording it
  (``may_send``); a broker held up longer closes it unsent (``abandon_unsent``). So from
  ``SEND_WINDOW`` plus the client's timeout after its recording, no submit of an intent can
  still be on its way to SnakeLab.
* SnakeLab handles its control requests one at a time, so once it answers a request sent after
  that moment, a submit it received is processed and its run stored. ``settle_own`` (the broker,
  right after its own submit went unanswered) and ``settle_pending`` (the orchestrator, before it
  asks any turn again) wait, within a bound, for such an answer (``snakelab_answered``) and then
  reconcile: the run is adopted, or it is known not to exist and the intent becomes
  ``abandoned``. Until then the intent stays pending and its turn is not asked again.

The one case this cannot see: a broker frozen in the microseconds between ``may_send`` and the
socket's send, for longer than the settle wait. Its run would then be stored without a proposal.

Every writer locks the intent row (``SELECT ... FOR UPDATE``) and writes events only while
the intent still needs them, so any number of concurrent reconcilers and the submitting
broker produce the two events exactly once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db import run_provenance
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database, placeholders
from ax3l.shared.db.event_log import EventLog, to_content
from ax3l.shared.event_models import ProposalAccepted, SimulationSubmitted
from ax3l.shared.snakelab_client import (
    SnakeLabClient,
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
)
from ax3l.shared.submit_once import created_runs

logger = logging.getLogger(__name__)

PENDING = "pending"  # recorded, SnakeLab's answer not yet handled
DONE = "done"  # the submitter wrote the events
ADOPTED = "adopted"  # reconcile found the run and wrote the events
ABANDONED = "abandoned"  # settled without a run, or never sent
REFUSED = "refused"  # SnakeLab answered with an error: no run was created

SEND_WINDOW = 5.0
"""Seconds after an intent's recording within which the broker may still send its submit."""


@dataclass(frozen=True)
class Intent:
    """One recorded submission."""

    intent_id: int
    state: str
    entry: str
    fingerprint: str
    run_id: str | None
    created_at: datetime
    config: dict[str, Any]
    values: dict[str, Any]
    changes: dict[str, Any]
    golden_run_id: str | None
    golden_event_id: int | None
    after_id: int
    request_event_id: int | None
    source_name: str | None
    checkpoint_event_id: int | None = None  # the round-robin turn it was admitted for
    proposer: str | None = None  # of the conversation that proposed it
    conversation_id: str | None = None


@dataclass(frozen=True)
class RecordedSubmission:
    """The outcome of ``complete_intent``."""

    run_id: str
    proposal_event_id: int | None
    submitted_event_id: int | None
    written: bool  # False when a reconciler had already written the events


def now() -> datetime:
    """The time intents are stamped with (UTC, naive, as ``created_at`` stores it)."""
    return datetime.now(UTC).replace(tzinfo=None)


def may_send(recorded_at: datetime) -> bool:
    """Whether an intent recorded at ``recorded_at`` may still be sent (``SEND_WINDOW``)."""
    return (now() - recorded_at).total_seconds() < SEND_WINDOW


def _intent(row: dict[str, Any]) -> Intent:
    content = json.loads(row["content"])
    return Intent(
        intent_id=int(row["intent_id"]),
        state=str(row["state"]),
        entry=str(row["entry"]),
        fingerprint=str(row["fingerprint"]),
        run_id=row["run_id"],
        created_at=row["created_at"],
        config=content["config"],
        values=content.get("values", {}),
        changes=content.get("changes", {}),
        golden_run_id=content.get("golden_run_id"),
        golden_event_id=content.get("golden_event_id"),
        after_id=int(content.get("after_id", 0)),
        request_event_id=content.get("request_event_id"),
        source_name=content.get("source_name"),
        checkpoint_event_id=content.get("checkpoint_event_id"),
        proposer=content.get("proposer"),
        conversation_id=content.get("conversation_id"),
    )


_COLUMNS = "intent_id, state, entry, fingerprint, run_id, created_at, content"


async def record_intent(
    db: Database,
    *,
    entry: str,
    config: dict[str, Any],
    values: dict[str, Any],
    changes: dict[str, Any],
    fingerprint: str,
    golden_run_id: str | None,
    golden_event_id: int | None,
    after_id: int,
    request_event_id: int | None = None,
    source_name: str | None = None,
    checkpoint_event_id: int | None = None,
    created_at: datetime | None = None,
) -> int:
    """Commit a pending intent before submitting; returns its id.

    ``checkpoint_event_id`` is the round-robin checkpoint the proposal was admitted for; it
    travels into ``proposal_accepted``, adopted or not, so the proposal names its turn.
    ``created_at`` (default: now) is what ``may_send`` is asked about before the submit.
    The conversation proposing it is the latest one (they run one at a time).
    """
    content = {
        "config": config,
        "values": values,
        "changes": changes,
        "golden_run_id": golden_run_id,
        "golden_event_id": golden_event_id,
        "after_id": after_id,
        "request_event_id": request_event_id,
        "source_name": source_name,
        "checkpoint_event_id": checkpoint_event_id,
    }
    async with db.transaction("recording a submission intent") as cur:
        proposer, conversation_id = await run_provenance.latest_conversation(cur)
        content |= {"proposer": proposer, "conversation_id": conversation_id}
        await cur.execute(
            "INSERT INTO submission_intents (created_at, state, entry, fingerprint, content)"
            " VALUES (%s, %s, %s, %s, %s)",
            (created_at or now(), PENDING, entry, fingerprint, to_content(content)),
        )
        return int(cur.lastrowid)


async def get_intent(db: Database, intent_id: int) -> Intent | None:
    row = await db.fetchone(
        f"SELECT {_COLUMNS} FROM submission_intents WHERE intent_id = %s",
        (intent_id,),
        doing="reading a submission intent",
    )
    return _intent(row) if row else None


async def pending_intents(db: Database) -> list[Intent]:
    """Intents whose outcome is still unknown, oldest first."""
    rows = await db.fetchall(
        f"SELECT {_COLUMNS} FROM submission_intents WHERE state = %s ORDER BY intent_id",
        (PENDING,),
        doing="reading pending submission intents",
    )
    return [_intent(row) for row in rows]


async def _lock(cur: Any, intent_id: int) -> Intent | None:
    await cur.execute(
        f"SELECT {_COLUMNS} FROM submission_intents WHERE intent_id = %s FOR UPDATE",
        (intent_id,),
    )
    row = await cur.fetchone()
    return _intent(dict(row)) if row else None


async def _write_events(
    cur: Any,
    log: EventLog,
    intent: Intent,
    run_id: str,
    queue_position: int | None,
    adopted: bool,
    host: str | None = None,
) -> tuple[int, int]:
    # Keys written only when they apply, so older rows and newer ones store alike.
    turn: dict[str, Any] = {}
    if intent.checkpoint_event_id is not None:
        turn["checkpoint_event_id"] = intent.checkpoint_event_id
    marked: dict[str, Any] = {"adopted": True} if adopted else {}
    proposal = ProposalAccepted(
        parameter=intent.entry,
        values=intent.values,
        changes=intent.changes,
        run_id=run_id,
        config=intent.config,
        golden_run_id=intent.golden_run_id,
        golden_event_id=intent.golden_event_id,
        **turn,
        **marked,
    )
    sent_to: dict[str, Any] = {"host": host} if host else {}
    submitted = SimulationSubmitted(
        run_id=run_id, config=intent.config, queue_position=queue_position, **marked, **sent_to
    )
    row: dict[str, Any] = {
        "process_id": run_id,
        "source_name": intent.source_name,
        "parameter": intent.entry,
    }
    proposal_id = await log.write(cur, proposal, parent_event_id=intent.request_event_id, **row)
    submitted_id = await log.write(cur, submitted, parent_event_id=proposal_id, **row)
    made = run_provenance.Row(
        run_id,
        proposal_id,
        intent.proposer,
        intent.entry,
        proposal_event_id=proposal_id,
        golden_run_id=intent.golden_run_id if intent.golden_run_id != run_id else None,
        conversation_id=intent.conversation_id,
    )
    await run_provenance.write(cur, made)
    return proposal_id, submitted_id


async def _resolve(cur: Any, intent_id: int, state: str, run_id: str | None) -> None:
    await cur.execute(
        "UPDATE submission_intents SET state = %s, run_id = %s, resolved_at = %s"
        " WHERE intent_id = %s",
        (state, run_id, now(), intent_id),
    )


async def complete_intent(
    db: Database,
    log: EventLog,
    intent_id: int,
    run_id: str,
    queue_position: int | None,
    host: str | None = None,
) -> RecordedSubmission:
    """SnakeLab accepted the run: write its two events and mark the intent done, atomically
    (``host``: the endpoint it was sent to, recorded when there are several).

    A no-op when a reconciler already adopted the run; an abandoned intent is completed after
    all, since the run exists.
    """
    async with db.transaction("logging an accepted submission") as cur:
        intent = await _lock(cur, intent_id)
        if intent is None:
            raise LookupError(f"submission intent {intent_id} does not exist")
        if intent.state in (DONE, ADOPTED):
            if intent.run_id != run_id:
                logger.warning(
                    "intent %s: SnakeLab created run %s but run %s was adopted for it",
                    intent_id,
                    run_id,
                    intent.run_id,
                )
            return RecordedSubmission(intent.run_id or run_id, None, None, written=False)
        proposal_id, submitted_id = await _write_events(
            cur, log, intent, run_id, queue_position, adopted=False, host=host
        )
        await _resolve(cur, intent_id, DONE, run_id)
    return RecordedSubmission(run_id, proposal_id, submitted_id, written=True)


async def refuse_intent(db: Database, intent_id: int) -> None:
    """SnakeLab answered with an error: no run exists, the intent is closed."""
    await _close_pending(db, intent_id, REFUSED, "closing a refused submission intent")


async def abandon_unsent(db: Database, intent_id: int) -> None:
    """The broker was held up past ``SEND_WINDOW`` and never sent the submit: closed, no run."""
    await _close_pending(db, intent_id, ABANDONED, "closing an unsent submission intent")


async def _close_pending(db: Database, intent_id: int, state: str, doing: str) -> None:
    async with db.transaction(doing) as cur:
        intent = await _lock(cur, intent_id)
        if intent is not None and intent.state == PENDING:
            await _resolve(cur, intent_id, state, None)


async def _claimed(db: Database, run_ids: list[str]) -> set[str]:
    if not run_ids:
        return set()
    rows = await db.fetchall(
        f"SELECT run_id FROM submission_intents WHERE run_id IN ({placeholders(run_ids)})",
        run_ids,
        doing="checking adopted runs",
    )
    return {str(row["run_id"]) for row in rows}


async def reconcile(
    db: Database,
    schema: ConfigSchema,
    log: EventLog,
    *,
    index: ConfigIndex | None = None,
    abandon_recorded_before: datetime | None = None,
    only: Collection[int] | None = None,
) -> list[str]:
    """Adopt the runs of pending intents that SnakeLab created; returns the adopted run ids.

    An intent without a run is abandoned only when it was recorded before
    ``abandon_recorded_before``: the caller vouches that SnakeLab answered a request sent after
    any submit of such an intent could have reached it (``settle_own``, ``settle_pending``).
    Without it nothing is abandoned. ``only`` limits the work to those intent ids.
    Safe to run concurrently from several processes: each intent is adopted exactly once.
    """
    pending = [
        intent for intent in await pending_intents(db) if only is None or intent.intent_id in only
    ]
    if not pending:
        return []
    index = index or ConfigIndex(db, schema)
    adopted: list[str] = []
    for intent in pending:
        found = await created_runs(index, intent.config, intent.after_id)
        taken = await _claimed(db, [run.run_id for run in found])
        candidates = [run.run_id for run in found if run.run_id not in taken]
        async with db.transaction("reconciling a submission intent") as cur:
            current = await _lock(cur, intent.intent_id)
            if current is None or current.state != PENDING:
                continue
            if candidates:
                run_id = candidates[0]
                await _write_events(cur, log, current, run_id, None, adopted=True)
                await _resolve(cur, intent.intent_id, ADOPTED, run_id)
                adopted.append(run_id)
                logger.warning(
                    "adopted SnakeLab run %s for submission intent %s (%s), whose answer was"
                    " lost or late",
                    run_id,
                    intent.intent_id,
                    intent.entry,
                )
                continue
            if abandon_recorded_before is not None and current.created_at < abandon_recorded_before:
                await _resolve(cur, intent.intent_id, ABANDONED, None)
                logger.warning(
                    "abandoned submission intent %s (%s): SnakeLab answered again and has no"
                    " run with its configuration",
                    intent.intent_id,
                    intent.entry,
                )
    return adopted


async def snakelab_answered(client: SnakeLabClient, deadline: float) -> datetime | None:
    """Ask SnakeLab's ``health`` until it answers, before ``deadline`` (``time.monotonic``).

    Returns when the answered request was sent (``now()``'s clock), or None when SnakeLab did
    not answer in time. Any reply counts, an error reply too: SnakeLab is serving again.
    """
    while (left := deadline - time.monotonic()) > 0:
        asked = now()
        try:
            await asyncio.wait_for(client.call("health"), left)
        except (SnakeLabUnavailable, TimeoutError):
            continue
        except (SnakeLabError, SnakeLabProtocolError):
            return asked  # an error reply, or one that breaks the contract, is still a reply
        return asked
    return None


async def settle_own(
    db: Database,
    schema: ConfigSchema,
    log: EventLog,
    client: SnakeLabClient,
    intent_id: int,
    *,
    index: ConfigIndex | None = None,
    wait_up_to: float,
) -> Intent | None:
    """The broker's own submit went unanswered: wait up to ``wait_up_to`` s for SnakeLab, then
    adopt the intent's run or abandon the intent. Returns the intent as it then stands
    (still ``pending`` when SnakeLab did not answer in time)."""
    # The submit's socket is closed, so nothing of this intent can reach SnakeLab any more.
    answered = await snakelab_answered(client, time.monotonic() + wait_up_to)
    if answered is not None:
        await reconcile(
            db, schema, log, index=index, abandon_recorded_before=answered, only=[intent_id]
        )
    return await get_intent(db, intent_id)


async def settle_pending(
    db: Database,
    schema: ConfigSchema,
    log: EventLog,
    client: SnakeLabClient,
    *,
    index: ConfigIndex | None = None,
    wait_up_to: float,
) -> list[Intent]:
    """Settle every pending intent within ``wait_up_to`` s; returns those still pending.

    Waits until no broker can still send any of them (``SEND_WINDOW`` plus the client's
    timeout after the youngest was recorded), then for SnakeLab to answer, then reconciles.
    """
    pending = await pending_intents(db)
    if not pending:
        return []
    deadline = time.monotonic() + wait_up_to
    in_flight = timedelta(seconds=SEND_WINDOW + client.timeout)
    youngest = max(intent.created_at for intent in pending)
    wait = (youngest + in_flight - now()).total_seconds()
    if wait > 0:
        await asyncio.sleep(min(wait, max(0.0, deadline - time.monotonic())))
    answered = await snakelab_answered(client, deadline)
    await reconcile(
        db,
        schema,
        log,
        index=index,
        abandon_recorded_before=None if answered is None else answered - in_flight,
    )
    return await pending_intents(db)
