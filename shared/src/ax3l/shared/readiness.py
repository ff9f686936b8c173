"""What ``/ready`` answers, in every service (orchestrator, toolbroker, reports).

One shape, so a supervisor, a healthcheck or a person reads all three the same way.

``readiness_router`` builds the two routes, ``/health`` and ``/ready``, from a service's own
checks. ``ServiceResources`` is what the orchestrator's and the broker's ``main`` open for their
routes (``app.state.resources``, read by ``app_resources``), and ``dependency_problems`` is the
check both make of it.

The status code carries the verdict (200 ready, 503 not), so a probe that only looks at the
code needs nothing else; the body says which checks ran and, for each that failed, why.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict

from ax3l.shared.db.database import Database
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.snakelab_client import (
    SnakeLabClient,
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
)

READY = 200
NOT_READY = 503


class Readiness(BaseModel):
    """A service's readiness, the body of its ``/ready``.

    ``checks`` names every dependency checked and whether it passed; ``problems`` has one
    line per failed check, ``"<check>: <why>"`` (during a database outage
    ``"database: waiting for the database since <time>: <error>"``, while the database's disk
    is full ``"database: disk full since <time>: <error>"``).
    """

    model_config = ConfigDict(frozen=True)

    status: Literal["ready", "not ready"]
    checks: dict[str, bool]
    problems: list[str]

    @classmethod
    def of(cls, failures: Mapping[str, str | None]) -> Readiness:
        """From each check's outcome, in order: ``None`` when it passed, else why it failed."""
        problems = [f"{name}: {why}" for name, why in failures.items() if why is not None]
        return cls(
            status="not ready" if problems else "ready",
            checks={name: why is None for name, why in failures.items()},
            problems=problems,
        )

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def http_status(self) -> int:
        """The code ``/ready`` answers with: 200 when ready, 503 otherwise."""
        return READY if self.ready else NOT_READY


# For a route's ``responses=``: the 503 carries the same body as the 200.
NOT_READY_RESPONSE: dict[int | str, dict[str, Any]] = {
    NOT_READY: {"model": Readiness, "description": "A dependency does not answer; see problems."}
}


async def database_problem(db: Database) -> str | None:
    """``None`` when the database answers a ping and the last write did not find its disk
    full, else why not (during an outage: since when it is waited for; on a full disk:
    "disk full since <time>: <error>")."""
    try:
        await SnakeLabRuns(db).ping()
    except DatabaseError as exc:
        return db.outage.describe() or str(exc)
    return db.disk_full.describe()


async def snakelab_problem(snakelab: SnakeLabClient) -> str | None:
    """``None`` when SnakeLab answers ``health``, else why not."""
    try:
        await snakelab.health()
    except (SnakeLabUnavailable, SnakeLabProtocolError, SnakeLabError) as exc:
        return str(exc)
    except Exception as exc:  # a malformed health reply must not turn /ready into a 500
        return f"{type(exc).__name__}: unexpected health reply"
    return None


Status = TypeVar("Status")


@dataclass(frozen=True)
class ServiceResources(Generic[Status]):
    """What a service's routes read: the database, SnakeLab and the service's live status."""

    db: Database
    snakelab: SnakeLabClient
    status: Status


def app_resources(request: Request) -> Any:
    """The resources the service's ``main`` (or a test) handed to its app."""
    return request.app.state.resources


async def dependency_problems(resources: ServiceResources[Any]) -> dict[str, str | None]:
    """The database's and SnakeLab's check, in that order."""
    return {
        "database": await database_problem(resources.db),
        "snakelab": await snakelab_problem(resources.snakelab),
    }


# A service's checks: each check's outcome, in order (None when it passed, else why not).
Checks = Callable[[Request], Awaitable[Mapping[str, str | None]]]


def readiness_router(
    checks: Checks, *, tags: list[str], health_doc: str = "The process is up."
) -> APIRouter:
    """``/health`` (always ok while the process serves) and ``/ready`` (``checks`` run on each
    request; their docstring is the route's description)."""
    router = APIRouter(tags=list(tags))

    @router.get("/health", description=health_doc)
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @router.get(
        "/ready", responses=NOT_READY_RESPONSE, description=inspect.cleandoc(checks.__doc__ or "")
    )
    async def ready(request: Request, response: Response) -> Readiness:
        readiness = Readiness.of(await checks(request))
        response.status_code = readiness.http_status
        return readiness

    return router
