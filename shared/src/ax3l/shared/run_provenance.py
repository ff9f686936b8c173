"""Who made each SnakeLab run, and for which entry: one reading of the events, shared by every
view that names a run's proposer (the report's ``/runs`` and golden pages, the Optuna export),
so they agree on every run.

* A proposal's run (``proposal_accepted``, written by the broker): the proposer the event names,
  else its conversation's (the ``conversation_started`` of the same process), else the latest
  conversation's before it (conversations run one at a time). The broker's events name no
  proposer, so in practice it is the conversation's. The entry is the proposal's parameter.
* A run the loop submitted itself (``simulation_submitted`` with a ``purpose``: ``seeding``,
  ``seed_rotation``, ``confirmation``...): proposer ``ax3l`` (``LOOP``), the purpose as its
  entry.
* A resubmission (``simulation_submitted`` with ``retry_of``): the run it retries' proposer and
  entry.

With each of these runs it keeps the golden configuration of its time (``challenged``): the one
a proposal was built from (its ``golden_run_id``, else the newest ``golden_config_created``
before it), the one a loop's run re-ran or confirmed against, a retry's original's; and the
conversation that proposed it (``conversation``: the process of the accepted
``conversation_ended`` naming the run, else of the conversation the proposer was read from).

Feed the events in ``event_id`` order (``add``); a run no event names has neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LOOP = "ax3l"  # the proposer of the runs the loop submits itself
# The events ``add`` reads; with ``golden_config_created`` for ``golden``.
EVENTS = ("conversation_started", "proposal_accepted", "simulation_submitted", "conversation_ended")
GOLDEN_EVENT = "golden_config_created"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass
class RunProvenance:
    """Each run's proposer and entry, the runs that became golden, and each run's golden of
    its time and conversation."""

    proposer: dict[str, str] = field(default_factory=dict)
    entry: dict[str, str] = field(default_factory=dict)
    golden: set[str] = field(default_factory=set)
    challenged: dict[str, str] = field(default_factory=dict)
    conversation: dict[str, str] = field(default_factory=dict)
    by_process: dict[str, str] = field(default_factory=dict)
    latest_conversation: str | None = None
    latest_conversation_id: str | None = None
    current_golden: str | None = None

    def add(self, name: str, process_id: str | None, content: Mapping[str, Any]) -> None:
        """One event (its name, process and JSON content's fields), in event order."""
        proposer, run_id = _text(content.get("proposer")), _text(content.get("run_id"))
        if name == "conversation_started":
            if proposer and process_id:
                self.by_process.setdefault(process_id, proposer)
            self.latest_conversation = proposer or self.by_process.get(process_id or "")
            self.latest_conversation_id = process_id
        elif name == "proposal_accepted" and run_id:
            if proposer and process_id:
                self.by_process.setdefault(process_id, proposer)
            named = proposer or self.by_process.get(process_id or "") or self.latest_conversation
            if named:
                self.proposer[run_id] = named
            if _text(content.get("parameter")):
                self.entry[run_id] = content["parameter"]
            # The broker writes it under the run's id; an older writer under the conversation's.
            talked = process_id if process_id in self.by_process else self.latest_conversation_id
            if talked:
                self.conversation.setdefault(run_id, talked)
            self._challenges(run_id, _text(content.get("golden_run_id")))
        elif name == "conversation_ended" and run_id and process_id:
            if content.get("outcome") == "accepted":
                self.conversation[run_id] = process_id
        elif name == "simulation_submitted" and run_id:
            self._submitted(run_id, content)
        elif name == GOLDEN_EVENT and run_id:
            self.golden.add(run_id)
            self.current_golden = run_id

    def _challenges(self, run_id: str, golden: str | None) -> None:
        """``run_id`` was built from (or re-runs) ``golden``, else the newest golden so far."""
        golden = golden or self.current_golden
        if golden and golden != run_id:
            self.challenged.setdefault(run_id, golden)

    def _submitted(self, run_id: str, content: Mapping[str, Any]) -> None:
        original = _text(content.get("retry_of"))
        if original and (original in self.proposer or original in self.entry):
            self._inherit(run_id, original)
            return
        purpose = _text(content.get("purpose"))
        if purpose and run_id not in self.proposer:
            self.proposer[run_id] = LOOP
            self.entry.setdefault(run_id, purpose)
            self._challenges(run_id, None)

    def _inherit(self, run_id: str, original: str) -> None:
        for known in (self.proposer, self.entry, self.challenged, self.conversation):
            if original in known:
                known[run_id] = known[original]
