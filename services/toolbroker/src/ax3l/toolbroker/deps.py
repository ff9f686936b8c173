"""Typed dependencies for the REST routes; the resources are opened by ``main`` and handed
to ``create_app``, so tests build the app with their own."""

from __future__ import annotations

from typing import Annotated, TypeAlias

from fastapi import Depends

from ax3l.shared.readiness import ServiceResources, app_resources
from ax3l.toolbroker.status import BrokerStatus

# What the REST routes read: the database, SnakeLab and the listener's counters.
BrokerResources: TypeAlias = ServiceResources[BrokerStatus]
ResourcesDep = Annotated[BrokerResources, Depends(app_resources)]
