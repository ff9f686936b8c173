"""What the loop is doing right now, for the status API (display only, never recovered from)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Phase(StrEnum):
    STARTING = "starting"
    SEEDING = "seeding"
    CHOOSING = "choosing"
    CONVERSING = "conversing"
    SETTLING = "settling a submission"
    WAITING = "waiting"
    COMPARING = "comparing"
    CONFIRMING = "confirming a promotion"
    MODELLING = "consulting the model of every run"
    ROTATING = "rotating"
    BACKING_OFF = "backing off"
    STOPPED = "stopped"


@dataclass
class LoopStatus:
    """The loop's live state; every field is re-derived from events after a restart."""

    process_id: str
    proposer: str
    phase: Phase = Phase.STARTING
    parameter: str | None = None
    index: int | None = None
    cycles: int = 0
    stagnant_cycles: int = 0
    seed_stagnant_rounds: int = 9
    promotion: str = "single"  # AX3L_PROMOTION
    seed: int | None = None
    golden_run_id: str | None = None
    golden_high_score: int | None = None
    conversation_id: str | None = None
    run_id: str | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    backoff_until: float | None = None
    started_at: float = field(default_factory=time.time)
    stop_reason: str | None = None
    # The model's failed conversations in a row on the current turn, and what takes over.
    failure_streak: int = 0
    fallback_proposer: str | None = None
    llm_fallback_after: int | None = None
    # AX3L_PIPELINE: the next turn's conversation running (or its tool call held) while the
    # current run trains: {"conversation_id", "parameter", "index", "state", "since"}.
    pipelined: dict[str, Any] | None = None
    # AX3L_PROMOTION=confirm: the confirmation in progress: {"candidate_run_id",
    # "golden_run_id", "seeds"} (the current seed first); None otherwise.
    confirmation: dict[str, Any] | None = None
    # AX3L_SNAKELAB_ENDPOINTS: each host's state (idle, running, down, unknown) as the loop's
    # client last saw it (the client's own dict, kept current); None with one host.
    snakelab_hosts: dict[str, str] | None = None
    # The database server's disk is full: "disk full since <time>: <error>" from the write
    # it refused until a step goes through again; None otherwise.
    disk_full: str | None = None

    def set_phase(self, phase: Phase, **fields: Any) -> None:
        self.phase = phase
        for name, value in fields.items():
            setattr(self, name, value)

    def error(self, message: str) -> None:
        self.last_error = message
        self.last_error_at = time.time()

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["phase"] = str(self.phase)
        return data
