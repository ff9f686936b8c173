"""Comparing proposers (llm, tpe, random) by what their accepted proposals achieved.

A proposal's proposer and conversation are its run's ``run_provenance`` row (written with the
acceptance, ``ax3l.shared.db.run_provenance``; the rows whose event is their own proposal, not a
retry's nor the loop's own runs). A conversation counts for the proposer its
``conversation_started`` names, else for the one its proposals' rows name. Histories without
any proposer recorded simply have no comparison.

A turn the model did not manage is taken by a fallback proposer: its ``conversation_started``
names ``"fallback_for": "llm"`` (and the model's ``failure_streak``). Such turns count for the
fallback (``fallback_turns``, and its proposals in ``fallback_proposals``) and against the
model (``turns_lost_to_fallback``); a turn is its checkpoint, so a retried fallback counts once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ax3l.reports.models.proposers import ModelStats, ProposerStats
from ax3l.shared import comparison_stats as stats
from ax3l.shared.db import report_reads
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import parse_message
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.event_models import (
    ConversationStarted,
    EventContent,
    GoldenConfigCreated,
    ProposalAccepted,
    read_content,
)

UNKNOWN = "unknown"


def _read(row: dict[str, Any]) -> EventContent:
    return read_content(row["name"], parse_message(row["content"]))


def _proposer(content: EventContent) -> str | None:
    """The proposer an event names (an empty name is none)."""
    if isinstance(content, ConversationStarted | ProposalAccepted | GoldenConfigCreated):
        return content.proposer or None
    return None


def _run_id(content: EventContent) -> str | None:
    if isinstance(content, ProposalAccepted | GoldenConfigCreated):
        return content.run_id or None
    return None


def _turn(started: ConversationStarted, row: dict[str, Any]) -> Any:
    """The turn a conversation belongs to: its checkpoint, else the conversation itself."""
    if started.checkpoint_event_id is not None:
        return started.checkpoint_event_id
    return ("event", row["event_id"])


@dataclass
class ProposerFold:
    """``proposer_stats``' counts: the conversations (their own proposer, fallback and turn)
    and the proposals' rows, in event order; drawn by ``stats``."""

    # each conversation_started: its process id, the proposer it names, fallback_for, its turn
    conversations: list[tuple[str | None, str | None, str | None, Any]] = field(
        default_factory=list
    )
    proposals: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    named_by_rows: dict[str, str] = field(default_factory=dict)  # conversation -> proposer
    golden_runs: set[str] = field(default_factory=set)
    any_named: bool = False

    def add_event(self, row: dict[str, Any]) -> None:
        """A ``conversation_started`` or ``golden_config_created`` row
        (``report_reads.event_texts``)."""
        content = _read(row)
        if _proposer(content):
            self.any_named = True
        if isinstance(content, ConversationStarted):
            fallback_for = content.fallback_for or None
            self.conversations.append(
                (row["process_id"], _proposer(content), fallback_for, _turn(content, row))
            )
        elif (run_id := _run_id(content)) is not None:
            self.golden_runs.add(run_id)

    def add_proposal(self, row: dict[str, Any]) -> None:
        """A proposal's ``run_provenance`` row (``report_reads.proposal_rows``)."""
        proposer, conversation = row["proposer"] or None, row["conversation_id"]
        self.proposals.append((str(row["run_id"]), proposer, conversation))
        if proposer:
            self.any_named = True
            if conversation:
                self.named_by_rows.setdefault(conversation, proposer)

    def stats(self, scores: Mapping[str, int | None]) -> list[ProposerStats]:
        """One row per proposer (``scores``: the completed runs' high scores)."""
        if not self.any_named:
            return []
        conversations: dict[str, int] = defaultdict(int)
        fallback_turns: dict[str, set[Any]] = defaultdict(set)
        lost_turns: dict[str, set[Any]] = defaultdict(set)
        fallbacks: dict[str, str] = {}  # fallback conversation -> its proposer
        for process, named, fallback_for, turn in self.conversations:
            name = named or self.named_by_rows.get(process or "") or UNKNOWN
            conversations[name] += 1
            if fallback_for is not None:
                fallback_turns[name].add(turn)
                lost_turns[fallback_for].add(turn)
                fallbacks[process or ""] = name
        runs: dict[str, list[str]] = defaultdict(list)
        fallback_proposals: dict[str, int] = defaultdict(int)
        for run_id, proposer, conversation in self.proposals:
            name = proposer or UNKNOWN
            runs[name].append(run_id)
            if conversation is not None and fallbacks.get(conversation) == name:
                fallback_proposals[name] += 1
        found = []
        for name in sorted(set(conversations) | set(runs) | set(lost_turns)):
            made = runs.get(name, [])
            scored = [s for run in made if (s := scores.get(run)) is not None]
            found.append(
                ProposerStats(
                    proposer=name,
                    conversations=conversations.get(name, 0),
                    proposals=len(made),
                    scored_runs=len(scored),
                    mean_score=sum(scored) / len(scored) if scored else None,
                    best_score=max(scored) if scored else None,
                    new_goldens=sum(1 for run in made if run in self.golden_runs),
                    fallback_turns=len(fallback_turns.get(name, ())),
                    fallback_proposals=fallback_proposals.get(name, 0),
                    turns_lost_to_fallback=len(lost_turns.get(name, ())),
                )
            )
        found.sort(key=lambda s: (s.proposer == UNKNOWN, -s.proposals, s.proposer))
        return found

    def proposed_runs(self) -> list[str]:
        return sorted({run_id for run_id, _, _ in self.proposals})


async def proposer_stats(db: Database) -> list[ProposerStats]:
    """One row per proposer that has been recorded, most proposals first."""
    fold = ProposerFold()
    names = ("conversation_started", "golden_config_created")
    for row in await report_reads.event_texts(db, names, doing="reading proposals"):
        fold.add_event(row)
    for row in await report_reads.proposal_rows(db):
        fold.add_proposal(row)
    return fold.stats(await SnakeLabRuns(db).completed_scores(fold.proposed_runs()))


# -- the model leaderboard --------------------------------------------------------------------
# A conversation is the model's when the model server answered or failed in it (its replies and
# failures carry the conversation id as process id); its model is the ``model`` its first reply
# names, else the configured ``AX3L_LLM_MODEL``, else UNKNOWN_MODEL. The broker's rejections and
# accepted proposals have process ids of their own: conversations run one at a time, so they
# belong to the latest conversation started before them. A fallback turn counts for the model
# of the latest model conversation before it (the one that kept failing the turn).

UNKNOWN_MODEL = "unknown model"
REJECTIONS = ("proposal_rejected_invalid", "proposal_rejected_duplicate")


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN is no number


def _percentile(values: list[float], q: float) -> float | None:
    return stats.quantile(values, q) if values else None


def _seconds(row: dict[str, Any]) -> float | None:
    """A request's duration: llama-server's timings when the reply has them, else the time
    from its prompt's event to its own."""
    prompt_ms, predicted_ms = _number(row.get("prompt_ms")), _number(row.get("predicted_ms"))
    if prompt_ms is not None and predicted_ms is not None:
        return (prompt_ms + predicted_ms) / 1000
    asked, answered = row.get("asked_at"), row.get("occurred_at")
    if asked is None or answered is None:
        return None
    return float((answered - asked).total_seconds())


async def model_stats(db: Database, configured_model: str | None = None) -> list[ModelStats]:
    """One row per model that has been asked, most accepted proposals first."""
    requests = await report_reads.model_requests(db)
    if not requests:
        return []
    model_of: dict[str, str] = {}
    for row in requests:
        name = row["model"] if row["name"] == "reply_received" else None
        conversation = row["process_id"] or ""
        if isinstance(name, str) and name and conversation not in model_of:
            model_of[conversation] = name
    fallback_name = configured_model or UNKNOWN_MODEL
    for row in requests:
        model_of.setdefault(row["process_id"] or "", fallback_name)

    wasted: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    seconds: dict[str, list[float]] = defaultdict(list)
    tokens: dict[str, int] = defaultdict(int)
    for row in requests:
        model = model_of[row["process_id"] or ""]
        if row["name"] == "llm_request_failed":
            wasted[model][str(row["kind"] or "unknown")] += 1
            if str(row["correctable"]).lower() == "true":
                continue  # it judged a reply, whose time is counted already
        elif (count := _number(row["completion_tokens"])) is not None:
            tokens[model] += int(count)
        if (duration := _seconds(row)) is not None:
            seconds[model].append(duration)

    names = ("conversation_started", "proposal_accepted", "golden_config_created", *REJECTIONS)
    rows = await report_reads.event_texts(db, names, doing="reading proposals")
    conversations: dict[str, int] = defaultdict(int)
    accepted: dict[str, list[str | None]] = defaultdict(list)
    fallback_turns: dict[str, set[Any]] = defaultdict(set)
    golden_runs: set[str] = set()
    current: str | None = None  # the model of the latest conversation, None: not a model's
    latest_model: str | None = None  # the model of the latest model conversation
    for row in rows:
        name = row["name"]
        if name == GoldenConfigCreated.event:
            if (run_id := _run_id(_read(row))) is not None:
                golden_runs.add(run_id)
        elif name == ConversationStarted.event:
            current = model_of.get(row["process_id"] or "")
            if current is not None:
                conversations[current] += 1
                latest_model = current
            else:
                started = ConversationStarted.from_stored(parse_message(row["content"]))
                if started.fallback_for and latest_model is not None:
                    fallback_turns[latest_model].add(_turn(started, row))
        elif current is None:
            continue  # a classical proposer's turn
        elif name == ProposalAccepted.event:
            accepted[current].append(_run_id(_read(row)))
        else:
            wasted[current][name] += 1

    stats = []
    for model in sorted(set(model_of.values())):
        runs = accepted.get(model, [])
        kinds = dict(sorted(wasted.get(model, {}).items()))
        stats.append(
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
                new_goldens=sum(1 for run in runs if run is not None and run in golden_runs),
            )
        )
    stats.sort(key=lambda s: (s.model == UNKNOWN_MODEL, -s.accepted_proposals, s.model))
    return stats
