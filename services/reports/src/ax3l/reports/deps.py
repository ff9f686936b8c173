"""Typed dependencies: settings, the database and the other resources the lifespan opened."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from ax3l.reports.orchestrator_status import OrchestratorMonitor
from ax3l.reports.queries.curves import LearningCurves
from ax3l.reports.queries.highscores import HighscoreReader
from ax3l.reports.queries.importance import ImportanceCache
from ax3l.reports.queries.proposer_board import ProposerBoard
from ax3l.reports.queries.run_model import RunModelCache
from ax3l.reports.queries.runs import RunsTable
from ax3l.reports.resources import Resources
from ax3l.reports.settings import ReportsSettings, get_settings
from ax3l.reports.snakelab_status import SnakeLabMonitor
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.cycles import CycleTracker
from ax3l.shared.db.database import Database
from ax3l.shared.readiness import app_resources

ResourcesDep = Annotated[Resources, Depends(app_resources)]


def _resource(name: str) -> Any:
    """A dependency handing out the lifespan's resource ``name``."""

    def get(resources: ResourcesDep) -> Any:
        return getattr(resources, name)

    return Depends(get)


@dataclass(frozen=True)
class Page:
    """The request a page answers and the templates it is drawn with."""

    request: Request
    templates: Jinja2Templates
    live_refresh: int = 0  # a page's refresh when none was chosen

    def render(self, template: str, context: dict[str, Any], **options: Any) -> HTMLResponse:
        """The template drawn with ``context``; ``options`` go to the response (headers). A
        ``refresh`` of None (none chosen) is ``live_refresh``, on every page alike."""
        if "refresh" in context and context["refresh"] is None:
            context = {**context, "refresh": self.live_refresh}
        return self.templates.TemplateResponse(self.request, template, context, **options)


def experiment_live(orchestrator: OrchestratorMonitor | None) -> bool:
    """Whether the experiment runs: its orchestrator answered the latest poll and has not
    stopped."""
    if orchestrator is None or orchestrator.latest.state != "up":
        return False
    return (orchestrator.latest.data or {}).get("phase") != "stopped"


def get_page(
    request: Request,
    resources: ResourcesDep,
    settings: Annotated[ReportsSettings, Depends(get_settings)],
) -> Page:
    live = experiment_live(resources.orchestrator)
    return Page(request, resources.templates, settings.live_refresh if live else 0)


SettingsDep = Annotated[ReportsSettings, Depends(get_settings)]
DatabaseDep = Annotated[Database, _resource("db")]
MonitorDep = Annotated[SnakeLabMonitor, _resource("monitor")]
OrchestratorDep = Annotated[OrchestratorMonitor | None, _resource("orchestrator")]
CyclesDep = Annotated[CycleTracker, _resource("cycles")]
HighscoresDep = Annotated[HighscoreReader, _resource("highscores")]
RunsTableDep = Annotated[RunsTable, _resource("runs")]
ImportanceDep = Annotated[ImportanceCache, _resource("importance")]
ProposerBoardDep = Annotated[ProposerBoard, _resource("proposers")]
ModelsDep = Annotated[RunModelCache, _resource("models")]
SchemaDep = Annotated[ConfigSchema, _resource("schema")]
CurvesDep = Annotated[LearningCurves, _resource("curves")]
PageDep = Annotated[Page, Depends(get_page)]
