"""The proposers page's three leaderboards folded from the events once, then kept up to date.

``queries/proposers.py`` (proposers, models) and ``queries/seats.py`` (seats) read every
conversation, proposal, reply and seat call on each call; at 1,000,000 events that takes
seconds. ``ProposerBoard`` folds the same rows, read by the same queries and judged by the same
rules, into per-proposer, per-conversation and per-seat aggregates, and each request then reads
only the events after the newest one it has folded (and nothing when none came). A wiped or
recreated history (another first event, or event ids going backwards) is folded again in full.

The proposers' board folds the conversations and the proposals' ``run_provenance`` rows
(``queries/proposers.ProposerFold``, read by event window like the events) and draws them per
answer. What can only be known later stays open until the answer is drawn:

* a conversation's model (its first reply names it; unnamed, the configured model): replies,
  failures, accepted proposals and rejections are summed per conversation and given to models
  when the answer is drawn;
* which accepted runs became golden (counted when the golden comes), and their scores: read
  incrementally from SnakeLab's runs (``RunScores``, the runs that were not finished yet
  again on each request).

The answer is kept until an event or a run changes.
"""

from __future__ import annotations

import asyncio
import bisect
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ax3l.reports.models.proposers import ModelStats, ProposerStats, SeatStats
from ax3l.reports.queries.proposers import (
    REJECTIONS,
    UNKNOWN_MODEL,
    ProposerFold,
    _number,
    _percentile,
    _read,
    _run_id,
    _seconds,
    _turn,
)
from ax3l.reports.queries.seats import SEAT_CALLS, SEAT_CALLS_DOING, SUBMIT_TOOLS, _waste_kind
from ax3l.shared.db import report_reads, run_provenance
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import parse_message
from ax3l.shared.db.report_reads import history_mark
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import (
    ConversationStarted,
    GoldenConfigCreated,
    ProposalAccepted,
    SeatCall,
    SeatCallRefused,
)
from ax3l.shared.wire import TERMINAL_STATES

WINDOW = 250_000  # event ids per read (each statement stays well inside the query timeout)
SCORE_CHUNK = 50_000  # runs per read of their scores
CONTENT_EVENTS = ("conversation_started", "proposal_accepted", "golden_config_created", *REJECTIONS)


@dataclass(slots=True)
class _Conversation:
    """A model conversation's requests (by its process id): its model (None until a reply
    names one), failures by kind, request seconds and completion tokens."""

    model: str | None = None
    wasted: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds: list[float] = field(default_factory=list)
    tokens: int = 0


@dataclass(slots=True)
class _Segment:
    """A ``conversation_started`` and the broker's events after it, until the next one."""

    process: str
    fallback_for: str | None
    turn: Any
    accepted: list[str | None] = field(default_factory=list)
    wasted: dict[str, int] = field(default_factory=lambda: defaultdict(int))


@dataclass(slots=True)
class _ModelSums:
    """What the conversations of one model (None: no reply named one) add up to."""

    conversations: set[str] = field(default_factory=set)  # their process ids
    started: int = 0  # conversation_started events of those processes
    wasted: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds: list[float] = field(default_factory=list)
    tokens: int = 0
    accepted: int = 0
    new_goldens: int = 0


@dataclass
class _Models:
    """``model_stats``'s counts by model, kept as the events come: a conversation counts for
    the model its first reply names; until one does (or for good) for None, drawn as the
    configured model. When a reply names a conversation's model later, its counts move."""

    requests: dict[str, _Conversation] = field(default_factory=dict)
    segments: list[_Segment] = field(default_factory=list)
    by_process: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    model_positions: list[int] = field(default_factory=list)  # segments of model conversations
    fallbacks: list[int] = field(default_factory=list)  # segments with fallback_for
    sums: dict[str | None, _ModelSums] = field(default_factory=lambda: defaultdict(_ModelSums))
    run_processes: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    golden_accepted: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def _share(self, process: str, sign: int) -> None:
        """Add (1) or take away (-1) a conversation's whole share from its model's sums."""
        conversation = self.requests[process]
        sums = self.sums[conversation.model]
        if sign > 0:
            sums.conversations.add(process)
        else:
            sums.conversations.discard(process)
        for kind, count in conversation.wasted.items():
            sums.wasted[kind] += sign * count
        if sign > 0:
            sums.seconds.extend(conversation.seconds)
        else:
            for value in conversation.seconds:
                sums.seconds.remove(value)
        sums.tokens += sign * conversation.tokens
        for position in self.by_process.get(process, ()):
            segment = self.segments[position]
            sums.started += sign
            sums.accepted += sign * len(segment.accepted)
            for name, count in segment.wasted.items():
                sums.wasted[name] += sign * count
        sums.new_goldens += sign * self.golden_accepted.get(process, 0)

    def add_request(self, row: dict[str, Any]) -> None:
        process = row["process_id"] or ""
        conversation = self.requests.get(process)
        if conversation is None:
            conversation = self.requests[process] = _Conversation()
            self._share(process, 1)
            positions = self.by_process.get(process, [])
            for position in positions:
                bisect.insort(self.model_positions, position)
        name = row["model"] if row["name"] == "reply_received" else None
        if isinstance(name, str) and name and conversation.model is None:
            self._share(process, -1)
            conversation.model = name
            self._share(process, 1)
        sums = self.sums[conversation.model]
        if row["name"] == "llm_request_failed":
            kind = str(row["kind"] or "unknown")
            conversation.wasted[kind] += 1
            sums.wasted[kind] += 1
            if str(row["correctable"]).lower() == "true":
                return  # it judged a reply, whose time is counted already
        elif (count := _number(row["completion_tokens"])) is not None:
            conversation.tokens += int(count)
            sums.tokens += int(count)
        if (duration := _seconds(row)) is not None:
            conversation.seconds.append(duration)
            sums.seconds.append(duration)

    def _sums_of(self, process: str) -> _ModelSums | None:
        conversation = self.requests.get(process)
        return None if conversation is None else self.sums[conversation.model]

    def start(self, process: str, fallback_for: str | None, turn: Any) -> None:
        position = len(self.segments)
        self.segments.append(_Segment(process, fallback_for, turn))
        self.by_process[process].append(position)
        if fallback_for:
            self.fallbacks.append(position)
        if (sums := self._sums_of(process)) is not None:
            sums.started += 1
            self.model_positions.append(position)

    def reject(self, name: str) -> None:
        if not self.segments:
            return
        segment = self.segments[-1]
        segment.wasted[name] += 1
        if (sums := self._sums_of(segment.process)) is not None:
            sums.wasted[name] += 1

    def accept(self, run_id: str | None, golden_runs: set[str]) -> None:
        if not self.segments:
            return
        segment = self.segments[-1]
        segment.accepted.append(run_id)
        sums = self._sums_of(segment.process)
        if sums is not None:
            sums.accepted += 1
        if run_id is not None:
            self.run_processes[run_id].append(segment.process)
            if run_id in golden_runs:
                self.golden_accepted[segment.process] += 1
                if sums is not None:
                    sums.new_goldens += 1

    def golden(self, run_id: str) -> None:
        """A run became golden (the first time): the conversations that proposed it count it."""
        for process in self.run_processes.get(run_id, ()):
            self.golden_accepted[process] += 1
            if (sums := self._sums_of(process)) is not None:
                sums.new_goldens += 1


@dataclass(slots=True)
class _Seat:
    calls: int = 0
    refused: int = 0
    accepted: int = 0
    accepted_runs: list[str | None] = field(default_factory=list)
    turns: set[Any] = field(default_factory=set)
    seconds: list[float] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=lambda: defaultdict(int))


@dataclass
class _Fold:
    """Everything folded from one history."""

    history: tuple[int, datetime] | None = None
    newest: int = 0
    version: int = 0  # counts folds that changed something
    table: bool = False  # the database has run_provenance (one of the user's own tables has not)
    golden_runs: set[str] = field(default_factory=set)
    seat_goldens: set[str] = field(default_factory=set)  # as seats.py reads them (any run id)
    proposers: ProposerFold = field(default_factory=ProposerFold)
    models: _Models = field(default_factory=_Models)
    seats: dict[str, _Seat] = field(default_factory=dict)
    seat_rows: int = 0


@dataclass(frozen=True)
class Board:
    """The three leaderboards of the proposers page."""

    proposers: list[ProposerStats]
    models: list[ModelStats]
    seats: list[SeatStats]


class RunScores:
    """Completed runs' high scores by run id, as ``queries/proposers.py`` reads them from
    SnakeLab's runs, read incrementally the way the runs table reads them (``queries/runs.py``):
    runs newer than the newest held, and the held runs not finished yet; another first run or
    another count of runs (a wipe) reads them all again."""

    def __init__(self) -> None:
        self.version = 0
        self._reset()

    def _reset(self) -> None:
        self.scores: dict[str, int] = {}
        self._first: str | None = None
        self._newest = 0
        self._held = 0
        self._pending: dict[int, str] = {}  # unfinished runs: id -> run id
        self.version += 1

    def _take(self, row: dict[str, Any]) -> bool:
        run_id, score = str(row["run_id"]), row["high_score"]
        before = self.scores.get(run_id)
        if row["status"] == "completed" and score is not None:
            self.scores[run_id] = int(score)
        else:
            self.scores.pop(run_id, None)
        if row["status"] in TERMINAL_STATES:
            self._pending.pop(int(row["id"]), None)
        else:
            self._pending[int(row["id"])] = run_id
        return self.scores.get(run_id) != before

    async def refresh(self, db: Database, retry: bool = True) -> None:
        runs = SnakeLabRuns(db)
        count, first_run = await runs.mark()
        if self._first is not None and first_run != self._first:
            self._reset()  # another history: the table was emptied or recreated
        changed = False
        if self._pending:
            for row in await runs.heads(sorted(self._pending)):
                changed = self._take(row) or changed
        while True:
            rows = await runs.heads(after=self._newest, limit=SCORE_CHUNK)
            for row in rows:
                changed = self._take(row) or changed
            if rows:
                self._newest = int(rows[-1]["id"])
                self._held += len(rows)
                if self._first is None:
                    self._first = str(rows[0]["run_id"])
            if len(rows) < SCORE_CHUNK:
                break
        if self._held != count and retry:
            # Rows went away (a partial wipe) or came in meanwhile: read everything again.
            self._reset()
            await self.refresh(db, retry=False)
            return
        if changed:
            self.version += 1


class ProposerBoard:
    """The proposers page's leaderboards, folded incrementally from the events (one per app)."""

    def __init__(self) -> None:
        self._fold = _Fold()
        self._lock = asyncio.Lock()
        self._scores = RunScores()
        self._answer: tuple[tuple[Any, ...], Board] | None = None

    async def read(self, db: Database, configured_model: str | None = None) -> Board:
        """The leaderboards as ``proposer_stats``, ``model_stats`` (``configured_model`` names
        the conversations no reply named a model for) and ``seat_stats`` draw them now."""
        async with self._lock:
            await self._refresh(db)
            fold = self._fold
            if fold.proposers.proposals:
                await self._scores.refresh(db)
            key = (fold.history, fold.version, self._scores.version, configured_model)
            if self._answer is not None and self._answer[0] == key:
                return self._answer[1]
            board = Board(
                proposers=fold.proposers.stats(self._scores.scores),
                models=_model_stats(fold, configured_model),
                seats=_seat_stats(fold),
            )
            self._answer = (key, board)
            return board

    async def _refresh(self, db: Database) -> None:
        history, newest = await history_mark(db)
        if history != self._fold.history or newest < self._fold.newest:
            # Another history (emptied, recreated or rolled back): fold it from the start.
            self._fold = _Fold(history=history, version=self._fold.version + 1)
        if not self._fold.table and await run_provenance.table_present(db):
            # Created (and back-filled) since: fold the history again with its rows.
            self._fold = _Fold(history=history, version=self._fold.version + 1, table=True)
        fold = self._fold
        while fold.newest < newest:
            start, end = fold.newest, min(newest, fold.newest + WINDOW)
            requests = await report_reads.model_requests(db, after=start, upto=end)
            contents = await report_reads.event_texts(
                db, CONTENT_EVENTS, doing="reading proposals", after=start, upto=end
            )
            calls = await report_reads.event_texts(
                db, SEAT_CALLS, doing=SEAT_CALLS_DOING, after=start, upto=end
            )
            made = await report_reads.proposal_rows(db, after=start, upto=end)
            for row in (*requests, *contents):
                if row["process_id"]:  # held many times over: one string each
                    row["process_id"] = sys.intern(row["process_id"])
            for row in requests:
                _add_request(fold, row)
            for row in contents:
                _add_content(fold, row)
            for row in calls:
                _add_seat_call(fold, row)
            for row in made:
                fold.proposers.add_proposal(row)
            fold.newest = end
            if requests or contents or calls or made:
                fold.version += 1


def _add_request(fold: _Fold, row: dict[str, Any]) -> None:
    fold.models.add_request(row)


def _add_content(fold: _Fold, row: dict[str, Any]) -> None:
    name = row["name"]
    if name in REJECTIONS:
        fold.models.reject(name)
        return
    content = _read(row)
    if isinstance(content, ConversationStarted | GoldenConfigCreated):
        fold.proposers.add_event(row)
    if isinstance(content, GoldenConfigCreated):
        if row["content"] is not None and content.run_id is not None:
            fold.seat_goldens.add(content.run_id)
        if (run_id := _run_id(content)) is not None and run_id not in fold.golden_runs:
            fold.golden_runs.add(run_id)
            fold.models.golden(run_id)
    elif isinstance(content, ConversationStarted):
        turn = _turn(content, row)
        fold.models.start(row["process_id"] or "", content.fallback_for or None, turn)
    elif isinstance(content, ProposalAccepted):
        fold.models.accept(_run_id(content), fold.golden_runs)


def _add_seat_call(fold: _Fold, row: dict[str, Any]) -> None:
    fold.seat_rows += 1
    model = SeatCallRefused if row["name"] == SeatCallRefused.event else SeatCall
    call = model.from_stored(parse_message(row["content"]))
    name = row["source_name"] or call.seat
    if not name:
        return  # a request without a valid token names no seat
    seat = fold.seats.setdefault(name, _Seat())
    seat.calls += 1
    if isinstance(call, SeatCallRefused):
        seat.refused += 1
    if call.tool not in SUBMIT_TOOLS:
        return
    if call.checkpoint_event_id is not None:
        seat.turns.add(call.checkpoint_event_id)
    kind = _waste_kind(call)
    if kind is not None:
        seat.kinds[kind] += 1
        return
    seat.accepted += 1
    if isinstance(call, SeatCall):
        seat.accepted_runs.append(call.run_id)
        if call.seconds_since_turn_opened is not None:
            seat.seconds.append(float(call.seconds_since_turn_opened))


def _model_stats(fold: _Fold, configured_model: str | None) -> list[ModelStats]:
    models = fold.models
    if not models.requests:
        return []
    fallback_name = configured_model or UNKNOWN_MODEL
    drawn: dict[str, list[_ModelSums]] = defaultdict(list)
    for label, sums in models.sums.items():
        if sums.conversations:
            drawn[label or fallback_name].append(sums)
    # A fallback turn counts for the model of the latest model conversation before it.
    fallback_turns: dict[str, set[Any]] = defaultdict(set)
    for position in models.fallbacks:
        segment = models.segments[position]
        if segment.process in models.requests:
            continue  # a model conversation's own turn
        before = bisect.bisect_left(models.model_positions, position)
        if before:
            latest = models.segments[models.model_positions[before - 1]].process
            label = models.requests[latest].model
            fallback_turns[label or fallback_name].add(segment.turn)
    found = []
    for model in sorted(drawn):
        parts = drawn[model]
        kinds: dict[str, int] = defaultdict(int)
        for part in parts:
            for kind, count in part.wasted.items():
                if count:
                    kinds[kind] += count
        seconds = parts[0].seconds if len(parts) == 1 else [v for p in parts for v in p.seconds]
        accepted = sum(part.accepted for part in parts)
        tokens = sum(part.tokens for part in parts)
        found.append(
            ModelStats(
                model=model,
                conversations=sum(part.started for part in parts),
                accepted_proposals=accepted,
                wasted_turns=sum(kinds.values()),
                wasted_kinds=dict(sorted(kinds.items())),
                fallback_turns=len(fallback_turns.get(model, ())),
                requests=len(seconds),
                median_seconds=_percentile(seconds, 0.5),
                p95_seconds=_percentile(seconds, 0.95),
                completion_tokens=tokens,
                completion_tokens_per_accepted=tokens / accepted if accepted else None,
                new_goldens=sum(part.new_goldens for part in parts),
            )
        )
    found.sort(key=lambda s: (s.model == UNKNOWN_MODEL, -s.accepted_proposals, s.model))
    return found


def _seat_stats(fold: _Fold) -> list[SeatStats]:
    if not fold.seat_rows:
        return []
    found = [
        SeatStats(
            seat=name,
            calls=seat.calls,
            refused_calls=seat.refused,
            turns_taken=len(seat.turns),
            accepted_proposals=seat.accepted,
            wasted_submissions=sum(seat.kinds.values()),
            wasted_kinds=dict(sorted(seat.kinds.items())),
            median_seconds_to_submission=statistics.median(seat.seconds) if seat.seconds else None,
            new_goldens=sum(1 for run in seat.accepted_runs if run in fold.seat_goldens),
        )
        for name, seat in fold.seats.items()
    ]
    return sorted(found, key=lambda s: (-s.accepted_proposals, s.seat))
