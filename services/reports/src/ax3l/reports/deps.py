"""Typed dependencies: settings, the database and the other resources the lifespan opened."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from ax3l.reports.orchestrator_status import OrchestratorMonitor
from ax3l.reports.queries.highscores import HighscoreReader
from ax3l.reports.queries.importance import ImportanceCache
from ax3l.reports.queries.proposer_board import ProposerBoard
from ax3l.reports.queries.runs import RunsTable
from ax3l.reports.resources import Resources
from ax3l.reports.settings import ReportsSettings, get_settings
from ax3l.reports.snakelab_status import SnakeLabMonitor
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.cycles import CycleTracker
from ax3l.shared.db.database import Database
from ax3l.shared.readiness import app_resources

ResourcesDep = Annotated[Resources, Depends(app_resources)]


def get_db(resources: ResourcesDep) -> Database:
    return resources.db


def get_monitor(resources: ResourcesDep) -> SnakeLabMonitor:
    return resources.monitor


def get_orchestrator(resources: ResourcesDep) -> OrchestratorMonitor | None:
    return resources.orchestrator


def get_cycles(resources: ResourcesDep) -> CycleTracker:
    return resources.cycles


def get_highscores(resources: ResourcesDep) -> HighscoreReader:
    return resources.highscores


def get_runs(resources: ResourcesDep) -> RunsTable:
    return resources.runs


def get_importance(resources: ResourcesDep) -> ImportanceCache:
    return resources.importance


def get_proposers(resources: ResourcesDep) -> ProposerBoard:
    return resources.proposers


def get_schema(resources: ResourcesDep) -> ConfigSchema:
    return resources.schema


@dataclass(frozen=True)
class Page:
    """The request a page answers and the templates it is drawn with."""

    request: Request
    templates: Jinja2Templates

    def render(self, template: str, context: dict[str, Any], **options: Any) -> HTMLResponse:
        """The template drawn with ``context``; ``options`` go to the response (headers)."""
        return self.templates.TemplateResponse(self.request, template, context, **options)


def get_page(request: Request, resources: ResourcesDep) -> Page:
    return Page(request, resources.templates)


SettingsDep = Annotated[ReportsSettings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_db)]
MonitorDep = Annotated[SnakeLabMonitor, Depends(get_monitor)]
OrchestratorDep = Annotated[OrchestratorMonitor | None, Depends(get_orchestrator)]
CyclesDep = Annotated[CycleTracker, Depends(get_cycles)]
HighscoresDep = Annotated[HighscoreReader, Depends(get_highscores)]
RunsTableDep = Annotated[RunsTable, Depends(get_runs)]
ImportanceDep = Annotated[ImportanceCache, Depends(get_importance)]
ProposerBoardDep = Annotated[ProposerBoard, Depends(get_proposers)]
SchemaDep = Annotated[ConfigSchema, Depends(get_schema)]
PageDep = Annotated[Page, Depends(get_page)]
