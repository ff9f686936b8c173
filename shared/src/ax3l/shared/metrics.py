"""Prometheus metrics: every name Ax3l exports, and ``/metrics`` for a service's app.

Each service serves ``GET /metrics`` (Prometheus text format, prometheus-client's default
registry) on its HTTP port: the orchestrator 28871, the toolbroker 28872, the reports 28870.
Names (docs/operations.md, "Metrics", lists them with their labels):

* every service: ``ax3l_http_request_seconds{service,method,route,status}`` (its HTTP requests;
  ``method`` one of ``HTTP_METHODS``, any other token ``other``: h11, which serves where
  httptools is not installed, accepts any token as a method, and each would be a new series;
  ``route`` is the route's template, ``unmatched`` for a 404 without one, ``other`` for a
  mounted app such as the static files) and
  ``ax3l_database_up{service}`` (1 when Ax3l's database answered the scrape's ping in 2 s);
* the orchestrator: ``ax3l_loop_steps_total``, ``ax3l_loop_step_seconds`` (a step: a turn, a
  comparison, a seeding or rotation, with its run's training), ``ax3l_model_requests_total``,
  ``ax3l_model_request_seconds``, ``ax3l_model_request_failures_total{kind}`` (the
  ``llm_request_failed`` kinds: timeout, http_error, no_tool_call...),
  ``ax3l_golden_high_score``, ``ax3l_seed`` and ``ax3l_snakelab_runs{status}`` (SnakeLab's runs
  by status, counted at the scrape);
* the toolbroker: ``ax3l_tool_requests_total{outcome}`` (``accepted``,
  ``rejected_invalid_value``, ``rejected_duplicate_config`` and ``refused_turn`` are the
  proposals; the others protocol errors) and ``ax3l_tool_request_seconds``.

Counters and histograms count since the process started (Prometheus' ``rate`` and
``increase`` handle restarts); the event log stays the durable record.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable
from typing import get_args

from fastapi import FastAPI, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ax3l.shared.db.database import Database
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.wire import TERMINAL_STATES, RunState

# Seconds: HTTP requests are fast; a step includes its run's training (minutes).
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STEP_BUCKETS = (0.1, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 3600.0, 14400.0)
MODEL_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
PING_TIMEOUT = 2.0
RUN_STATES: tuple[str, ...] = get_args(RunState)
# The method label's values; any other method is ``other`` (a label's values must be bounded).
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})

HTTP_REQUEST_SECONDS = Histogram(
    "ax3l_http_request_seconds",
    "HTTP requests a service answered, by route template and status",
    ["service", "method", "route", "status"],
    buckets=HTTP_BUCKETS,
)
DATABASE_UP = Gauge(
    "ax3l_database_up", "1 when Ax3l's database answered the scrape's ping", ["service"]
)
LOOP_STEPS = Counter("ax3l_loop_steps", "Steps the experiment loop completed")
LOOP_STEP_SECONDS = Histogram(
    "ax3l_loop_step_seconds", "Duration of a completed loop step", buckets=STEP_BUCKETS
)
MODEL_REQUESTS = Counter("ax3l_model_requests", "Requests sent to the model server")
MODEL_REQUEST_SECONDS = Histogram(
    "ax3l_model_request_seconds", "Duration of a model server request", buckets=MODEL_BUCKETS
)
MODEL_FAILURES = Counter(
    "ax3l_model_request_failures", "Model replies that could not be used, by kind", ["kind"]
)
GOLDEN_HIGH_SCORE = Gauge("ax3l_golden_high_score", "The golden configuration's high score")
SEED = Gauge("ax3l_seed", "The experiment's current seed")
SNAKELAB_RUNS = Gauge("ax3l_snakelab_runs", "SnakeLab's runs by status", ["status"])
TOOL_REQUESTS = Counter(
    "ax3l_tool_requests", "Tool-channel requests the broker answered, by outcome", ["outcome"]
)
TOOL_REQUEST_SECONDS = Histogram(
    "ax3l_tool_request_seconds", "Duration of a tool-channel request", buckets=HTTP_BUCKETS
)

Refresh = Callable[[Request], Awaitable[None]]


class RequestTimer:
    """ASGI middleware: each HTTP request's duration in ``ax3l_http_request_seconds``."""

    def __init__(self, app: ASGIApp, service: str):
        self.app, self.service = app, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            # Mounted apps (static files) have no route template: ``other``.
            template = getattr(scope.get("route"), "path", None)
            route = template or ("unmatched" if status == 404 else "other")
            if route != "/metrics":
                method = scope.get("method", "")
                HTTP_REQUEST_SECONDS.labels(
                    self.service, method if method in HTTP_METHODS else "other", route, str(status)
                ).observe(time.perf_counter() - started)


async def database_up(db: Database) -> bool:
    """Whether ``db`` answers a ping within ``PING_TIMEOUT``."""
    try:
        async with asyncio.timeout(PING_TIMEOUT):
            await SnakeLabRuns(db).ping()
    except Exception:  # any failure means down, for a gauge
        return False
    return True


def add_metrics(app: FastAPI, service: str, refresh: Refresh | None = None) -> None:
    """``GET /metrics`` on ``app`` and the timing of its requests. At each scrape the database
    of ``app.state.resources`` (when there is one) is pinged and ``refresh`` sets the
    service's gauges."""

    async def metrics(request: Request) -> Response:
        db = getattr(getattr(request.app.state, "resources", None), "db", None)
        DATABASE_UP.labels(service).set(1 if db is not None and await database_up(db) else 0)
        if refresh is not None:
            await refresh(request)
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    app.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
    app.add_middleware(RequestTimer, service=service)


class RunsByStatus:
    """``ax3l_snakelab_runs{status}``, counted incrementally: runs below the oldest run that is
    not terminal yet never change status again (SnakeLab appends runs and ends each once), so
    they are counted once and kept; each scrape counts only the runs from that one on. A
    SnakeLab table that shrank (runs deleted by hand) is counted again from the start."""

    def __init__(self) -> None:
        self.settled_through = 0  # every run with id <= this one is terminal and counted
        self.settled: dict[str, int] = {}

    async def refresh(self, db: Database) -> None:
        runs = SnakeLabRuns(db)
        newest, first_open = await runs.newest_and_first_open(self.settled_through, TERMINAL_STATES)
        if newest is None:
            total = await runs.newest_id()
            if total is None or total < self.settled_through:
                self.settled_through, self.settled = 0, {}  # the table shrank: start over
        else:
            settle_to = newest if first_open is None else first_open - 1
            if settle_to > self.settled_through:
                for status, n in await runs.counts_by_status(self.settled_through, settle_to):
                    self.settled[status] = self.settled.get(status, 0) + n
                self.settled_through = settle_to
        counts = collections.Counter(dict.fromkeys(RUN_STATES, 0))
        counts.update(self.settled)
        counts.update(dict(await runs.counts_by_status(self.settled_through, None)))
        for status, n in bounded_states(counts).items():
            SNAKELAB_RUNS.labels(status).set(n)


def bounded_states(counts: collections.Counter[str]) -> dict[str, int]:
    """Runs by status with any status SnakeLab's table holds outside ``RUN_STATES`` counted as
    ``other``: the label's values stay the known few whatever the table holds."""
    bounded = {state: counts.get(state, 0) for state in RUN_STATES}
    bounded["other"] = sum(n for state, n in counts.items() if state not in bounded)
    return bounded
