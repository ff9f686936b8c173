"""What the loop's steps share: ``Runs``, the loop's own runs, and ``StepFailed``."""

from __future__ import annotations

from dataclasses import dataclass

from ax3l.orchestrator.waiting import RunWaiter
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.submit_once import OnceSubmitter


@dataclass(frozen=True)
class Runs:
    """How the loop runs a configuration itself (a baseline, a confirmation, a retry) and finds
    the runs of others: the events that record them, SnakeLab's runs found by configuration
    (read with the schema), the exactly-once submitter, the waiter, and how often a
    configuration may run again."""

    db: Database
    log: EventLog
    schema: ConfigSchema
    index: ConfigIndex
    submitter: OnceSubmitter
    waiter: RunWaiter
    baseline_max_attempts: int  # AX3L_BASELINE_MAX_ATTEMPTS
    infra_retry_max: int  # AX3L_INFRA_RETRY_MAX


class StepFailed(RuntimeError):
    """A step could not finish now (a failed baseline run, a failed conversation); the loop
    backs off and derives the next step from the events again."""
