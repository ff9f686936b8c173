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

Feed the events in ``event_id`` order (``add``); a run no event names has neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LOOP = "ax3l"  # the proposer of the runs the loop submits itself
# The events ``add`` reads; with ``golden_config_created`` for ``golden``.
EVENTS = ("conversation_started", "proposal_accepted", "simulation_submitted")
GOLDEN_EVENT = "golden_config_created"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass
class RunProvenance:
    """Each run's proposer and entry, and the runs that became golden."""

    proposer: dict[str, str] = field(default_factory=dict)
    entry: dict[str, str] = field(default_factory=dict)
    golden: set[str] = field(default_factory=set)
    by_process: dict[str, str] = field(default_factory=dict)
    latest_conversation: str | None = None

    def add(self, name: str, process_id: str | None, content: Mapping[str, Any]) -> None:
        """One event (its name, process and JSON content's fields), in event order."""
        proposer, run_id = _text(content.get("proposer")), _text(content.get("run_id"))
        if name == "conversation_started":
            if proposer and process_id:
                self.by_process.setdefault(process_id, proposer)
            self.latest_conversation = proposer or self.by_process.get(process_id or "")
        elif name == "proposal_accepted" and run_id:
            if proposer and process_id:
                self.by_process.setdefault(process_id, proposer)
            named = proposer or self.by_process.get(process_id or "") or self.latest_conversation
            if named:
                self.proposer[run_id] = named
            if _text(content.get("parameter")):
                self.entry[run_id] = content["parameter"]
        elif name == "simulation_submitted" and run_id:
            self._submitted(run_id, content)
        elif name == GOLDEN_EVENT and run_id:
            self.golden.add(run_id)

    def _submitted(self, run_id: str, content: Mapping[str, Any]) -> None:
        original = _text(content.get("retry_of"))
        if original and (original in self.proposer or original in self.entry):
            self._inherit(run_id, original)
            return
        purpose = _text(content.get("purpose"))
        if purpose and run_id not in self.proposer:
            self.proposer[run_id] = LOOP
            self.entry.setdefault(run_id, purpose)

    def _inherit(self, run_id: str, original: str) -> None:
        if original in self.proposer:
            self.proposer[run_id] = self.proposer[original]
        if original in self.entry:
            self.entry[run_id] = self.entry[original]
