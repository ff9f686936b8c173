"""The report server's FastAPI app: resources opened in the lifespan, routers, error pages."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request, Response

from ax3l.reports import errors
from ax3l.reports.api import api_router
from ax3l.reports.database_watch import DatabaseWatch
from ax3l.reports.orchestrator_status import OrchestratorMonitor
from ax3l.reports.queries.highscores import HighscoreReader
from ax3l.reports.rendering import make_templates
from ax3l.reports.resources import Resources
from ax3l.reports.settings import ReportsSettings, get_settings
from ax3l.reports.snakelab_status import SnakeLabMonitor
from ax3l.reports.warming import Warmer
from ax3l.shared.config_schema import cached_schema
from ax3l.shared.cycles import CycleTracker
from ax3l.shared.db.database import Database
from ax3l.shared.metrics import add_metrics
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.shared.trusted_hosts import allow_only

DESCRIPTION = """Read-only pages and JSON over Ax3l's events and SnakeLab's runs.

Pages: `/` (dashboard), `/runs`, `/runs/compare`, `/plots/history`, `/plots/slice`,
`/plots/parallel`, `/plots/importance`, `/events` (event log; `/?category=...` links redirect
there), `/events/{id}`, `/experiment-highscores`, `/golden-configurations`, `/score-distribution`,
`/simulations/{run_id}`, `/proposers`, `/comparison`. JSON: everything under `/api/`.
Bad query values are answered with 422 and a `message`.
"""

# Scripts only from this server (plotly.js and the pages' script are served here); inline
# styles are allowed for the page's own CSS and Plotly's.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline';"
        " img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none';"
        " form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def create_app(settings: ReportsSettings | None = None) -> FastAPI:
    """The app; ``settings`` override the environment (tests pass their own)."""
    chosen = settings or get_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = Database(chosen)
        monitor = SnakeLabMonitor(
            SnakeLabClient(chosen.snakelab_endpoint, timeout=chosen.status_timeout),
            interval=chosen.status_interval,
        )
        orchestrator = OrchestratorMonitor(
            chosen.orchestrator_status_url(),
            timeout=chosen.status_timeout,
            interval=chosen.status_interval,
        )
        cycles = CycleTracker()

        async def available() -> None:
            await cycles.refresh(db)
            warmer.start()  # in the background: readiness does not wait for it

        database = DatabaseWatch(db, chosen.db_wait_max, available)
        app.state.database_watch = database
        app.state.resources = resources = Resources(
            db=db,
            monitor=monitor,
            cycles=cycles,
            highscores=HighscoreReader(),
            schema=cached_schema(chosen.schema_file()),
            templates=make_templates(),
            orchestrator=orchestrator,
        )
        warmer = Warmer(resources)
        monitor.start()
        orchestrator.start()
        try:
            # The cycle count reads the whole history once; do it before the first page asks
            # (while the database is away: as soon as it is back).
            await database.start()
            yield
        finally:
            await warmer.stop()
            await database.stop()
            await monitor.stop()
            await orchestrator.stop()
            await db.close()

    app = FastAPI(
        title="Ax3l reports",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        # Swagger UI and ReDoc load their scripts from a CDN; /api-reference (this server's
        # own page) and /openapi.json describe the API without them.
        docs_url=None,
        redoc_url=None,
    )
    app.dependency_overrides[get_settings] = lambda: chosen
    errors.install(app)
    app.include_router(api_router)

    @app.middleware("http")
    async def security_headers(request: Request, call_next) -> Response:  # type: ignore[no-untyped-def]
        response: Response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    add_metrics(app, "reports")
    allow_only(app, chosen.allowed_hosts)
    return app
