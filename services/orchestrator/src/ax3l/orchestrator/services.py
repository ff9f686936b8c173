"""The loop's collaborators, built once and handed to each behaviour module."""

from __future__ import annotations

from dataclasses import dataclass

from ax3l.orchestrator.status import LoopStatus
from ax3l.orchestrator.waiting import RunWaiter
from ax3l.shared.config_index import ConfigIndex
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.settings import Settings
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.shared.submit_once import OnceSubmitter


@dataclass(frozen=True)
class LoopServices:
    settings: Settings
    schema: ConfigSchema
    db: Database
    log: EventLog
    snakelab: SnakeLabClient
    index: ConfigIndex
    status: LoopStatus
    waiter: RunWaiter
    submitter: OnceSubmitter
    process_id: str


class StepFailed(RuntimeError):
    """A step could not finish now (a failed baseline run, a failed conversation); the loop
    backs off and derives the next step from the events again."""
