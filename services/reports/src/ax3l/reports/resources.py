"""What the app opens in its lifespan and hands to routes through dependencies."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.templating import Jinja2Templates

from ax3l.reports.orchestrator_status import OrchestratorMonitor
from ax3l.reports.queries.curves import LearningCurves
from ax3l.reports.queries.highscores import HighscoreReader
from ax3l.reports.queries.importance import ImportanceCache
from ax3l.reports.queries.proposer_board import ProposerBoard
from ax3l.reports.queries.run_model import RunModelCache
from ax3l.reports.queries.runs import RunsTable
from ax3l.reports.snakelab_status import SnakeLabMonitor
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.cycles import CycleTracker
from ax3l.shared.db.database import Database


@dataclass
class Resources:
    db: Database
    monitor: SnakeLabMonitor
    cycles: CycleTracker
    highscores: HighscoreReader
    schema: ConfigSchema
    templates: Jinja2Templates
    orchestrator: OrchestratorMonitor | None = None
    runs: RunsTable = field(default_factory=RunsTable)
    importance: ImportanceCache = field(default_factory=ImportanceCache)
    proposers: ProposerBoard = field(default_factory=ProposerBoard)
    curves: LearningCurves = field(default_factory=LearningCurves)
    models: RunModelCache = field(default_factory=RunModelCache)
