"""Who chose a run and why, from the events of the conversation that proposed it.

The runs table knows each proposal's conversation (its ``run_provenance`` row); this reads,
for a page's runs only, that conversation's start (a fallback says whom it stood in for and
why), its accepted end (the ``model`` proposer's figures under ``model``), its last reply (the
one whose tool call was accepted: the model's reasoning and text) and, for a seat's turn, the
seat whose submission was accepted. Everything read here is untrusted text: templates escape
it, the terminal prints it as plain text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import polars as pl

from ax3l.reports.event_contents import read_reply
from ax3l.reports.event_sentences import sentence
from ax3l.reports.models.runs import RunReason, RunRow
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import parse_message
from ax3l.shared.db.report_reads import reason_rows

SUMMARY_CHARS = 140  # a row's one line


@dataclass
class _Found:
    """What one conversation's events said, as they are read in event order."""

    proposer: str | None = None
    seat: str | None = None
    fallback: str | None = None
    reply_event_id: int | None = None
    reply: Any = None
    model: dict[str, Any] | None = None


def _number(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.4g}" if isinstance(value, float) else str(value)
    return None


def model_sentence(figures: dict[str, Any]) -> str | None:
    """The ``model`` proposer's figures in one sentence: ``predicted 41.2 ± 3.1 against the
    best predicted 40 (expected improvement 0.42 of 129 choices, 300 runs)``, or why it chose
    at random."""
    if isinstance(figures.get("random"), str):
        return f"chosen at random: {figures['random']}"
    mean, sd = _number(figures.get("predicted_mean")), _number(figures.get("predicted_sd"))
    if mean is None:
        return None
    said = f"predicted {mean}" + (f" ± {sd}" if sd else "")
    if (incumbent := _number(figures.get("incumbent_mean"))) is not None:
        said += f" against the best predicted {incumbent}"
    details = []
    if (gain := _number(figures.get("expected_improvement"))) is not None:
        details.append(f"expected improvement {gain}")
    if (choices := _number(figures.get("choices"))) is not None:
        details.append(f"of {choices} choices")
    if (runs := _number(figures.get("runs"))) is not None:
        details.append(f"{runs} runs fitted")
    return said + (f" ({', '.join(details)})" if details else "")


def _short(text: str, limit: int = SUMMARY_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reason(conversation: str, found: _Found) -> RunReason:
    reply = read_reply(found.reply) if found.reply is not None else None
    reasoning = reply.reasoning if reply else None
    message = reply.message if reply else None
    parts: list[str] = []
    if found.seat:
        parts.append(f"seat {found.seat}")
    if found.fallback:
        parts.append(found.fallback)
    if found.model is not None and (said := model_sentence(found.model)):
        parts.append(said)
    if reasoning or message:
        parts.append(f"“{_short(reasoning or message or '')}”")
    return RunReason(
        conversation_id=conversation,
        proposer=found.proposer,
        seat=found.seat,
        fallback=found.fallback,
        reasoning=reasoning,
        message=message,
        reply_event_id=found.reply_event_id if reply else None,
        model=found.model,
        summary=_short(" · ".join(parts), 2 * SUMMARY_CHARS) if parts else None,
    )


def _read(found: _Found, row: dict[str, Any]) -> None:
    name, content = row["name"], parse_message(row["content"])
    if name == "reply_received":
        found.reply_event_id, found.reply = int(row["event_id"]), content
        return
    if not isinstance(content, dict):
        return
    if name == "seat_call":
        found.seat = row["source_name"] or content.get("seat")
    elif name == "conversation_started":
        proposer = content.get("proposer")
        found.proposer = proposer if isinstance(proposer, str) else found.proposer
        if content.get("fallback_for"):
            found.fallback = sentence(name, content, row["parameter"])
    elif name == "conversation_ended" and content.get("outcome") == "accepted":
        figures = content.get("model")
        found.model = figures if isinstance(figures, dict) else None


async def run_reasons(db: Database, conversations: dict[str, str]) -> dict[str, RunReason]:
    """Who chose each run and why, for ``conversations`` (run id -> the conversation that
    proposed it); a run whose conversation left no events has none."""
    by_conversation: dict[str, _Found] = {}
    for row in await reason_rows(db, sorted(set(conversations.values()))):
        _read(by_conversation.setdefault(row["process_id"], _Found()), row)
    return {
        run_id: _reason(conversation, by_conversation[conversation])
        for run_id, conversation in conversations.items()
        if conversation in by_conversation
    }


def conversations_of(frame: pl.DataFrame, run_ids: list[str]) -> dict[str, str]:
    """The conversation that proposed each of ``run_ids`` that has one (the runs table's)."""
    if not run_ids or frame.is_empty():
        return {}
    picked = frame.filter(pl.col("run_id").is_in(run_ids) & pl.col("conversation").is_not_null())
    return dict(zip(picked["run_id"].to_list(), picked["conversation"].to_list(), strict=True))


async def explained(db: Database, frame: pl.DataFrame, runs: list[RunRow]) -> list[RunRow]:
    """``runs`` with their seat and one-line reason (``RunRow.reason``)."""
    reasons = await run_reasons(db, conversations_of(frame, [run.run_id for run in runs]))
    return [
        run.model_copy(update={"seat": found.seat, "reason": found.summary})
        if (found := reasons.get(run.run_id)) is not None
        else run
        for run in runs
    ]


def model_figures(reason: RunReason | None) -> list[tuple[str, str]]:
    """The ``model`` proposer's figures as ``(name, value)`` for a page's list."""
    if reason is None or not reason.model:
        return []
    return [
        (key.replace("_", " "), _number(value) or json.dumps(value, ensure_ascii=False))
        for key, value in reason.model.items()
    ]
