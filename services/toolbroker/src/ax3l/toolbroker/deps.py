"""Typed dependencies for the REST routes; the resources are opened by ``main`` and handed
to ``create_app``, so tests build the app with their own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from ax3l.shared.db.database import Database
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.toolbroker.status import BrokerStatus


@dataclass
class BrokerResources:
    """What the REST routes read: the database, SnakeLab and the listener's counters."""

    db: Database
    snakelab: SnakeLabClient
    status: BrokerStatus


def get_resources(request: Request) -> BrokerResources:
    resources: BrokerResources = request.app.state.resources
    return resources


ResourcesDep = Annotated[BrokerResources, Depends(get_resources)]
