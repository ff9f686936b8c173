"""Comparing proposers (llm, tpe, random) by what their accepted proposals achieved.

The proposer is read from ``proposal_accepted`` or ``conversation_started`` contents; when a
proposal does not name it, it inherits its conversation's (same process id), else the latest
conversation's before it (conversations run one at a time). Histories without any proposer
recorded simply have no comparison.

A turn the model did not manage is taken by a fallback proposer: its ``conversation_started``
names ``"fallback_for": "llm"`` (and the model's ``failure_streak``). Such turns count for the
fallback (``fallback_turns``, and its proposals in ``fallback_proposals``) and against the
model (``turns_lost_to_fallback``); a turn is its checkpoint, so a retried fallback counts once.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ax3l.reports.event_contents import parse
from ax3l.shared.db.database import Database

UNKNOWN = "unknown"


@dataclass(frozen=True)
class ProposerStats:
    proposer: str
    conversations: int
    proposals: int
    scored_runs: int
    mean_score: float | None
    best_score: int | None
    new_goldens: int
    fallback_turns: int = 0
    fallback_proposals: int = 0
    turns_lost_to_fallback: int = 0


def _field(content: Any, key: str) -> str | None:
    value = content.get(key) if isinstance(content, dict) else None
    return value if isinstance(value, str) and value else None


def _turn(content: Any, row: dict[str, Any]) -> Any:
    """The turn a conversation belongs to: its checkpoint, else the conversation itself."""
    checkpoint = content.get("checkpoint_event_id") if isinstance(content, dict) else None
    if isinstance(checkpoint, int) and not isinstance(checkpoint, bool):
        return checkpoint
    return ("event", row["event_id"])


async def _contents(db: Database, names: tuple[str, ...]) -> list[dict[str, Any]]:
    return await db.fetchall(
        "SELECT e.event_id, e.name, e.process_id, m.content FROM events e"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id"
        f" WHERE e.name IN ({', '.join(['%s'] * len(names))}) ORDER BY e.event_id",
        names,
        doing="reading proposals",
    )


async def _scores(db: Database, run_ids: list[str]) -> dict[str, int | None]:
    scores: dict[str, int | None] = {}
    for start in range(0, len(run_ids), 1000):
        chunk = run_ids[start : start + 1000]
        rows = await db.fetchall(
            f"SELECT run_id, high_score FROM {db.sl('simulation_runs')}"
            f" WHERE run_id IN ({', '.join(['%s'] * len(chunk))}) AND status = 'completed'",
            chunk,
            doing="reading proposal scores",
        )
        for row in rows:
            scores[row["run_id"]] = None if row["high_score"] is None else int(row["high_score"])
    return scores


async def proposer_stats(db: Database) -> list[ProposerStats]:
    """One row per proposer that has been recorded, most proposals first."""
    rows = await _contents(
        db, ("conversation_started", "proposal_accepted", "golden_config_created")
    )
    contents = [(row, parse(row["content"])) for row in rows]
    # A process (conversation) is known by whichever of its events names the proposer.
    by_process: dict[str, str] = {}
    for row, content in contents:
        proposer = _field(content, "proposer")
        if proposer and row["name"] != "golden_config_created" and row["process_id"]:
            by_process.setdefault(row["process_id"], proposer)
    if not by_process and not any(_field(c, "proposer") for _, c in contents):
        return []
    latest: str | None = None
    latest_fallback = False
    conversations: dict[str, int] = defaultdict(int)
    proposals: dict[str, list[str | None]] = defaultdict(list)
    fallback_turns: dict[str, set[Any]] = defaultdict(set)
    lost_turns: dict[str, set[Any]] = defaultdict(set)
    fallback_proposals: dict[str, int] = defaultdict(int)
    golden_runs: set[str] = set()
    for row, content in contents:
        named = _field(content, "proposer") or by_process.get(row["process_id"] or "")
        if row["name"] == "conversation_started":
            latest = named
            conversations[named or UNKNOWN] += 1
            fallback_for = _field(content, "fallback_for")
            latest_fallback = fallback_for is not None
            if fallback_for is not None:
                turn = _turn(content, row)
                fallback_turns[named or UNKNOWN].add(turn)
                lost_turns[fallback_for].add(turn)
        elif row["name"] == "proposal_accepted":
            # Conversations run one at a time: an anonymous proposal belongs to the latest one.
            proposer = named or latest or UNKNOWN
            proposals[proposer].append(_field(content, "run_id"))
            if latest_fallback and proposer == (latest or UNKNOWN):
                fallback_proposals[proposer] += 1
        elif (run_id := _field(content, "run_id")) is not None:
            golden_runs.add(run_id)
    scores = await _scores(
        db, sorted({run for runs in proposals.values() for run in runs if run is not None})
    )
    stats = []
    for name in sorted(set(conversations) | set(proposals) | set(lost_turns)):
        runs = proposals.get(name, [])
        scored = [s for run in runs if run is not None and (s := scores.get(run)) is not None]
        stats.append(
            ProposerStats(
                proposer=name,
                conversations=conversations.get(name, 0),
                proposals=len(runs),
                scored_runs=len(scored),
                mean_score=sum(scored) / len(scored) if scored else None,
                best_score=max(scored) if scored else None,
                new_goldens=sum(1 for run in runs if run is not None and run in golden_runs),
                fallback_turns=len(fallback_turns.get(name, ())),
                fallback_proposals=fallback_proposals.get(name, 0),
                turns_lost_to_fallback=len(lost_turns.get(name, ())),
            )
        )
    stats.sort(key=lambda s: (s.proposer == UNKNOWN, -s.proposals, s.proposer))
    return stats
