"""A repeat's turns, counted from its events (``repeat.read_turns`` reads them).

* accepted proposals; model turns (replies, and failed requests that got no reply); wasted
  turns by kind (failed model requests by their ``kind``, the broker's rejections) and by
  reason (``wasted_reasons``: the vocabulary of ``ax3l.shared.wasted``, no tool call, malformed
  arguments, invalid value, duplicate, timeout, token cap...);
* ``by_kind``: accepted proposals and wasted turns split by the kind of the event's entry:
  ``finite`` when the registry can list the entry's choices (``registry.domain``), else
  ``continuous``; a wasted turn without a known entry counts under ``unknown``;
* ``proposed_by`` (the hybrids only, whose conversations say their ``hybrid_role``): accepted
  proposals by who proposed them, under ``llm+tpe`` ``model`` (the LLM) or ``tpe``, under
  ``llm+model`` ``llm`` or ``model`` (a fallback conversation standing in for a failing LLM
  counts for its own proposer), and ``model_matched_tpe`` (``llm_matched_model``): the LLM's
  proposals equal to one of the suggestions of the latest ``TpeAdvice`` (``ModelAdvice``)
  prompt of their conversation; ``llm_steps``: the accepted proposals (numbered from 0) whose
  turn the draw gave the LLM (``decided_by``), a fallback's included: the same numbers in
  every hybrid arm of a repeat.

An accepted proposal belongs to the conversation its run's ``run_provenance`` row names
(``TurnEvent.conversation``, ``ax3l.shared.db.run_provenance``); a conversation's prompts carry its
process id. Events without either (a rejection, a hand-made history) belong to the latest
conversation: they run one at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ax3l.compare.tpe_advice import (
    ADVICE_SOURCE,
    MODEL_ADVICE_SOURCE,
    advice_suggestions,
    matches_a_suggestion,
    model_advice_suggestions,
)
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.registry import ENTRIES, domain
from ax3l.shared.wasted import waste_of

WASTED_EVENTS = ("llm_request_failed", "proposal_rejected_invalid", "proposal_rejected_duplicate")
COUNTED_EVENTS = (
    "conversation_started",
    "prompt_sent",
    "reply_received",
    "proposal_accepted",
    *WASTED_EVENTS,
)
FINITE, CONTINUOUS, UNKNOWN = "finite", "continuous", "unknown"
MODEL, TPE, MATCHED = "model", "tpe", "model_matched_tpe"
# Per hybrid: the LLM's role, the classical proposer's, and the LLM's matches of the advice.
HYBRID_ROLES = {
    "llm+tpe": (MODEL, TPE, MATCHED),
    "llm+model": ("llm", "model", "llm_matched_model"),
}


@dataclass(frozen=True)
class TurnEvent:
    """One event as the count needs it: ``content`` is the parsed JSON, or a prompt's text."""

    name: str
    parameter: str | None = None
    source_name: str | None = None
    content: Any = None
    process_id: str | None = None
    conversation: str | None = None  # a proposal's: its run's run_provenance row's


@dataclass
class _Conversation:
    """What counting needs of one conversation: who proposes in it, who decided its turn, and
    its latest advice's suggestions."""

    role: str | None = None
    decided_by: str | None = None
    suggestions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class TurnCounts:
    accepted_proposals: int = 0
    model_turns: int = 0
    wasted_kinds: dict[str, int] = field(default_factory=dict)
    conversations: int = 0
    fallback_turns: int = 0
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)
    proposed_by: dict[str, int] = field(default_factory=dict)  # empty outside the hybrid
    wasted_reasons: dict[str, int] = field(default_factory=dict)  # ax3l.shared.wasted's kinds
    llm_steps: list[int] = field(default_factory=list)  # the hybrids only

    @property
    def wasted_turns(self) -> int:
        return sum(self.wasted_kinds.values())

    def content(self) -> dict[str, Any]:
        """What a repeat row's ``content`` keeps of them (the three totals have columns)."""
        found = asdict(self)
        del found["accepted_proposals"], found["model_turns"]
        if not self.proposed_by:
            del found["proposed_by"], found["llm_steps"]
        return found


def entry_kinds(schema: ConfigSchema) -> dict[str, str]:
    """Each registry entry's kind, ``finite`` or ``continuous``, under ``schema``."""
    return {e.name: CONTINUOUS if domain(schema, e) is None else FINITE for e in ENTRIES}


def conversation_role(content: Mapping[str, Any]) -> str | None:
    """Who proposes in a hybrid conversation (its ``hybrid_role``, or the fallback proposer
    that stands in for the model); None outside the hybrid."""
    role = content.get("hybrid_role")
    if not isinstance(role, str):
        return None
    if content.get("fallback_for"):
        proposer = content.get("proposer")
        return proposer if isinstance(proposer, str) and proposer else "fallback"
    return role


def count_turns(events: Iterable[TurnEvent], kinds: Mapping[str, str]) -> TurnCounts:
    """The counts of ``events`` (in event order); ``kinds`` is ``entry_kinds``' answer."""
    tally = _Tally(kinds)
    for event in events:
        tally.add(event)
    return tally.counts()


class _Tally:
    def __init__(self, kinds: Mapping[str, str]):
        self.kinds = kinds
        self.found = TurnCounts()
        self.wasted: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.by_kind: dict[str, Counter[str]] = {FINITE: Counter(), CONTINUOUS: Counter()}
        self.proposed_by: Counter[str] | None = None  # set by the first hybrid conversation
        self.roles = HYBRID_ROLES["llm+tpe"]  # the hybrid's (its first conversation's)
        self.conversations: dict[str, _Conversation] = {}
        self.latest = _Conversation()

    def _of(self, process_id: str | None) -> _Conversation:
        return self.conversations.get(process_id or "", self.latest)

    def add(self, event: TurnEvent) -> None:
        content = event.content if isinstance(event.content, dict) else {}
        if event.name == "conversation_started":
            self._started(event, content)
        elif event.name == "prompt_sent" and isinstance(event.content, str):
            if event.source_name == ADVICE_SOURCE:
                self._of(event.process_id).suggestions = advice_suggestions(event.content)
            elif event.source_name == MODEL_ADVICE_SOURCE:
                self._of(event.process_id).suggestions = model_advice_suggestions(event.content)
        elif event.name == "reply_received":
            self.found.model_turns += 1
        elif event.name == "proposal_accepted":
            self._accepted(event, content)
        elif event.name in WASTED_EVENTS:
            self._wasted(event, content)

    def _started(self, event: TurnEvent, content: dict[str, Any]) -> None:
        self.found.conversations += 1
        if content.get("fallback_for"):
            self.found.fallback_turns += 1
        decided_by = content.get("decided_by")
        self.latest = _Conversation(
            conversation_role(content), decided_by if isinstance(decided_by, str) else None
        )
        if event.process_id:
            self.conversations[event.process_id] = self.latest
        if self.latest.role is not None and self.proposed_by is None:
            self.roles = HYBRID_ROLES.get(str(content.get("hybrid")), HYBRID_ROLES["llm+tpe"])
            self.proposed_by = Counter(dict.fromkeys(self.roles, 0))

    def _accepted(self, event: TurnEvent, content: dict[str, Any]) -> None:
        talked = self._of(event.conversation)
        if talked.decided_by == "llm":
            self.found.llm_steps.append(self.found.accepted_proposals)
        self.found.accepted_proposals += 1
        self._by_kind(event, content)["accepted"] += 1
        if talked.role is None or self.proposed_by is None:
            return
        self.proposed_by[talked.role] += 1
        changes = content.get("changes")
        llm, _, matched = self.roles
        if (
            talked.role == llm
            and isinstance(changes, dict)
            and matches_a_suggestion(changes, talked.suggestions)
        ):
            self.proposed_by[matched] += 1

    def _wasted(self, event: TurnEvent, content: dict[str, Any]) -> None:
        self.reasons[waste_of(event.name, content) or "unknown"] += 1
        if event.name == "llm_request_failed":
            self.wasted[f"llm_request_failed:{content.get('kind') or 'unknown'}"] += 1
            # A failure of the request itself (no reply came) was a model turn too.
            if content.get("correctable") is False:
                self.found.model_turns += 1
        else:
            self.wasted[event.name] += 1
        self._by_kind(event, content)["wasted"] += 1

    def _by_kind(self, event: TurnEvent, content: dict[str, Any]) -> Counter[str]:
        parameter = event.parameter or content.get("parameter")
        kind = self.kinds.get(parameter, UNKNOWN) if isinstance(parameter, str) else UNKNOWN
        return self.by_kind.setdefault(kind, Counter())

    def counts(self) -> TurnCounts:
        self.found.wasted_kinds = dict(sorted(self.wasted.items()))
        self.found.wasted_reasons = dict(sorted(self.reasons.items()))
        self.found.by_kind = {
            kind: {"accepted": counter["accepted"], "wasted": counter["wasted"]}
            for kind, counter in self.by_kind.items()
        }
        self.found.proposed_by = dict(self.proposed_by or {})
        return self.found
