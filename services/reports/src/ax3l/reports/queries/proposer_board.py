"""The proposers page's three leaderboards folded from the events once, then kept up to date.

``queries/proposers.py`` (proposers, models) and ``queries/seats.py`` (seats) read every
conversation, proposal, reply and seat call on each call; at 1,000,000 events that takes
seconds. ``ProposerBoard`` folds the same rows, read by the same queries and judged by the same
rules, into per-proposer, per-conversation and per-seat aggregates, and each request then reads
only the events after the newest one it has folded (and nothing when none came). A wiped or
recreated history (another first event, or event ids going backwards) is folded again in full.

What can only be known later stays open until the answer is drawn:

* a conversation's proposer when only a later event of its process names it: the fold notes
  the processes it met unnamed, and folds its (compact) records again when one is named;
* a conversation's model (its first reply names it; unnamed, the configured model): replies,
  failures, accepted proposals and rejections are summed per conversation and given to models
  when the answer is drawn;
* which accepted runs became golden, and their scores: the runs' scores come from the runs
  table (``queries/runs.py``), itself refreshed incrementally.

The answer is kept until an event or a run changes.
"""

from __future__ import annotations

import asyncio
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from ax3l.reports.event_contents import parse
from ax3l.reports.models.proposers import ModelStats, ProposerStats, SeatStats
from ax3l.reports.queries.proposers import (
    REJECTIONS,
    UNKNOWN,
    UNKNOWN_MODEL,
    _contents,
    _model_requests,
    _number,
    _percentile,
    _proposer,
    _read,
    _run_id,
    _seconds,
    _turn,
)
from ax3l.reports.queries.runs import RunsTable
from ax3l.reports.queries.seats import SUBMIT_TOOLS, _seat_calls, _waste_kind
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.event_models import (
    ConversationStarted,
    GoldenConfigCreated,
    ProposalAccepted,
    SeatCall,
    SeatCallRefused,
)

WINDOW = 250_000  # event ids per read (each statement stays well inside the query timeout)
CONTENT_EVENTS = ("conversation_started", "proposal_accepted", "golden_config_created", *REJECTIONS)

# A conversation or proposal as the proposer fold needs it:
# (is a conversation, process id, the proposer it names, fallback_for, turn or run id).
Record = tuple[bool, str | None, str | None, str | None, Any]


@dataclass
class _Proposers:
    """``proposer_stats``'s counts, folded in event order."""

    records: list[Record] = field(default_factory=list)
    by_process: dict[str, str] = field(default_factory=dict)
    unnamed: set[str] = field(default_factory=set)  # processes met before one named them
    stale: bool = False  # a process met unnamed was named later: fold the records again
    latest: str | None = None
    latest_fallback: bool = False
    conversations: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    proposals: dict[str, list[str | None]] = field(default_factory=lambda: defaultdict(list))
    fallback_turns: dict[str, set[Any]] = field(default_factory=lambda: defaultdict(set))
    lost_turns: dict[str, set[Any]] = field(default_factory=lambda: defaultdict(set))
    fallback_proposals: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, record: Record) -> None:
        self.records.append(record)
        self._fold(record)

    def _fold(self, record: Record) -> None:
        conversation, process, proposer, fallback_for, key = record
        if proposer and process and process not in self.by_process:
            self.by_process[process] = proposer
            if process in self.unnamed:
                self.stale = True
        named = proposer or self.by_process.get(process or "")
        if not named and process:
            self.unnamed.add(process)
        if conversation:
            self.latest = named
            self.conversations[named or UNKNOWN] += 1
            self.latest_fallback = fallback_for is not None
            if fallback_for is not None:
                self.fallback_turns[named or UNKNOWN].add(key)
                self.lost_turns[fallback_for].add(key)
        else:
            # Conversations run one at a time: an anonymous proposal belongs to the latest one.
            chosen = named or self.latest or UNKNOWN
            self.proposals[chosen].append(key)
            if self.latest_fallback and chosen == (self.latest or UNKNOWN):
                self.fallback_proposals[chosen] += 1

    def refolded(self) -> _Proposers:
        """The same records folded again knowing every process's proposer from the start."""
        again = _Proposers(records=self.records)
        for _, process, proposer, _, _ in self.records:
            if proposer and process:
                again.by_process.setdefault(process, proposer)
        for record in self.records:
            again._fold(record)
        again.stale = False
        return again


@dataclass
class _Conversation:
    """A model conversation's requests (by its process id): its model, failures by kind,
    request seconds and completion tokens."""

    model: str | None = None
    wasted: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    seconds: list[float] = field(default_factory=list)
    tokens: int = 0


@dataclass
class _Segment:
    """A ``conversation_started`` and the broker's events after it, until the next one."""

    process: str
    fallback_for: str | None
    turn: Any
    accepted: list[str | None] = field(default_factory=list)
    wasted: dict[str, int] = field(default_factory=lambda: defaultdict(int))


@dataclass
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
    any_named: bool = False
    golden_runs: set[str] = field(default_factory=set)
    seat_goldens: set[str] = field(default_factory=set)  # as seats.py reads them (any run id)
    proposers: _Proposers = field(default_factory=_Proposers)
    requests: dict[str, _Conversation] = field(default_factory=dict)
    segments: list[_Segment] = field(default_factory=list)
    seats: dict[str, _Seat] = field(default_factory=dict)
    seat_rows: int = 0


@dataclass(frozen=True)
class Board:
    """The three leaderboards of the proposers page."""

    proposers: list[ProposerStats]
    models: list[ModelStats]
    seats: list[SeatStats]


class ProposerBoard:
    """The proposers page's leaderboards, folded incrementally from the events (one per app)."""

    def __init__(self) -> None:
        self._fold = _Fold()
        self._lock = asyncio.Lock()
        self._answer: tuple[tuple[Any, ...], pl.DataFrame | None, Board] | None = None

    async def read(
        self,
        db: Database,
        runs: RunsTable,
        schema: ConfigSchema,
        configured_model: str | None = None,
    ) -> Board:
        """The leaderboards as ``proposer_stats``, ``model_stats`` and ``seat_stats`` draw them
        now; ``runs`` gives the accepted runs' scores."""
        async with self._lock:
            await self._refresh(db)
            fold = self._fold
            if fold.proposers.stale:
                fold.proposers = fold.proposers.refolded()
            run_ids = {run for runs_ in fold.proposers.proposals.values() for run in runs_ if run}
            frame = await runs.frame(db, schema) if run_ids else None
            key = (fold.history, fold.version, configured_model)
            if self._answer is not None:
                held_key, held_frame, held = self._answer
                if held_key == key and held_frame is frame:  # the runs table keeps its frame
                    return held
            scores = _scores(frame)
            board = Board(
                proposers=_proposer_stats(fold, scores),
                models=_model_stats(fold, configured_model),
                seats=_seat_stats(fold),
            )
            self._answer = (key, frame, board)
            return board

    async def _refresh(self, db: Database) -> None:
        first, top = await asyncio.gather(
            db.fetchone(
                "SELECT event_id, occurred_at FROM events ORDER BY event_id LIMIT 1",
                doing="reading the event history",
            ),
            db.fetchone("SELECT MAX(event_id) AS newest FROM events", doing="reading events"),
        )
        history = None if first is None else (int(first["event_id"]), first["occurred_at"])
        newest = int(top["newest"] or 0) if top else 0
        if history != self._fold.history or newest < self._fold.newest:
            # Another history (emptied, recreated or rolled back): fold it from the start.
            self._fold = _Fold(history=history, version=self._fold.version + 1)
        fold = self._fold
        while fold.newest < newest:
            start, end = fold.newest, min(newest, fold.newest + WINDOW)
            requests = await _model_requests(db, after=start, upto=end)
            contents = await _contents(db, CONTENT_EVENTS, after=start, upto=end)
            calls = await _seat_calls(db, after=start, upto=end)
            for row in requests:
                _add_request(fold, row)
            for row in contents:
                _add_content(fold, row)
            for row in calls:
                _add_seat_call(fold, row)
            fold.newest = end
            if requests or contents or calls:
                fold.version += 1


def _add_request(fold: _Fold, row: dict[str, Any]) -> None:
    conversation = fold.requests.setdefault(row["process_id"] or "", _Conversation())
    name = row["model"] if row["name"] == "reply_received" else None
    if isinstance(name, str) and name and conversation.model is None:
        conversation.model = name
    if row["name"] == "llm_request_failed":
        conversation.wasted[str(row["kind"] or "unknown")] += 1
        if str(row["correctable"]).lower() == "true":
            return  # it judged a reply, whose time is counted already
    elif (count := _number(row["completion_tokens"])) is not None:
        conversation.tokens += int(count)
    if (duration := _seconds(row)) is not None:
        conversation.seconds.append(duration)


def _add_content(fold: _Fold, row: dict[str, Any]) -> None:
    name = row["name"]
    if name in REJECTIONS:
        if fold.segments:
            fold.segments[-1].wasted[name] += 1
        return
    content = _read(row)
    proposer = _proposer(content)
    if proposer:
        fold.any_named = True
    if isinstance(content, GoldenConfigCreated):
        if row["content"] is not None and content.run_id is not None:
            fold.seat_goldens.add(content.run_id)
        if (run_id := _run_id(content)) is not None:
            fold.golden_runs.add(run_id)
    elif isinstance(content, ConversationStarted):
        turn = _turn(content, row)
        fallback_for = content.fallback_for or None
        fold.proposers.add((True, row["process_id"], proposer, fallback_for, turn))
        fold.segments.append(_Segment(row["process_id"] or "", fallback_for, turn))
    elif isinstance(content, ProposalAccepted):
        run_id = _run_id(content)
        fold.proposers.add((False, row["process_id"], proposer, None, run_id))
        if fold.segments:
            fold.segments[-1].accepted.append(run_id)


def _add_seat_call(fold: _Fold, row: dict[str, Any]) -> None:
    fold.seat_rows += 1
    model = SeatCallRefused if row["name"] == SeatCallRefused.event else SeatCall
    call = model.from_stored(parse(row["content"]))
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


def _scores(frame: pl.DataFrame | None) -> dict[str, int]:
    """Completed runs' high scores by run id (as ``queries/proposers.py`` reads them)."""
    if frame is None:
        return {}
    done = frame.filter((pl.col("status") == "completed") & pl.col("high_score").is_not_null())
    return dict(zip(done["run_id"].to_list(), done["high_score"].to_list(), strict=True))


def _proposer_stats(fold: _Fold, scores: dict[str, int]) -> list[ProposerStats]:
    folded = fold.proposers
    if not folded.by_process and not fold.any_named:
        return []
    found = []
    names = set(folded.conversations) | set(folded.proposals) | set(folded.lost_turns)
    for name in sorted(names):
        runs = folded.proposals.get(name, [])
        scored = [s for run in runs if run is not None and (s := scores.get(run)) is not None]
        found.append(
            ProposerStats(
                proposer=name,
                conversations=folded.conversations.get(name, 0),
                proposals=len(runs),
                scored_runs=len(scored),
                mean_score=sum(scored) / len(scored) if scored else None,
                best_score=max(scored) if scored else None,
                new_goldens=sum(1 for run in runs if run is not None and run in fold.golden_runs),
                fallback_turns=len(folded.fallback_turns.get(name, ())),
                fallback_proposals=folded.fallback_proposals.get(name, 0),
                turns_lost_to_fallback=len(folded.lost_turns.get(name, ())),
            )
        )
    found.sort(key=lambda s: (s.proposer == UNKNOWN, -s.proposals, s.proposer))
    return found


def _model_stats(fold: _Fold, configured_model: str | None) -> list[ModelStats]:
    if not fold.requests:
        return []
    fallback_name = configured_model or UNKNOWN_MODEL
    model_of = {
        process: conversation.model or fallback_name
        for process, conversation in fold.requests.items()
    }
    wasted: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    seconds: dict[str, list[float]] = defaultdict(list)
    tokens: dict[str, int] = defaultdict(int)
    for process, conversation in fold.requests.items():
        model = model_of[process]
        for kind, count in conversation.wasted.items():
            wasted[model][kind] += count
        seconds[model].extend(conversation.seconds)
        tokens[model] += conversation.tokens
    conversations: dict[str, int] = defaultdict(int)
    accepted: dict[str, list[str | None]] = defaultdict(list)
    fallback_turns: dict[str, set[Any]] = defaultdict(set)
    latest_model: str | None = None  # the model of the latest model conversation
    for segment in fold.segments:
        current = model_of.get(segment.process)
        if current is None:
            if segment.fallback_for and latest_model is not None:
                fallback_turns[latest_model].add(segment.turn)
            continue  # a classical proposer's turn
        conversations[current] += 1
        latest_model = current
        accepted[current].extend(segment.accepted)
        for name, count in segment.wasted.items():
            wasted[current][name] += count
    found = []
    for model in sorted(set(model_of.values())):
        runs = accepted.get(model, [])
        kinds = dict(sorted(wasted.get(model, {}).items()))
        found.append(
            ModelStats(
                model=model,
                conversations=conversations.get(model, 0),
                accepted_proposals=len(runs),
                wasted_turns=sum(kinds.values()),
                wasted_kinds=kinds,
                fallback_turns=len(fallback_turns.get(model, ())),
                requests=len(seconds.get(model, [])),
                median_seconds=_percentile(seconds.get(model, []), 0.5),
                p95_seconds=_percentile(seconds.get(model, []), 0.95),
                completion_tokens=tokens.get(model, 0),
                completion_tokens_per_accepted=tokens.get(model, 0) / len(runs) if runs else None,
                new_goldens=sum(1 for run in runs if run is not None and run in fold.golden_runs),
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
