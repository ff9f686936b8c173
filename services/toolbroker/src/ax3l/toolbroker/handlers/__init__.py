"""One handler per tool method (the spec's SubmitSingleValueHandler and
SubmitPairValuesHandler); both finish in the shared submission workflow."""

from __future__ import annotations

from typing import Any, Protocol

from ax3l.toolbroker.results import HandlerResult
from ax3l.toolbroker.submission import RequestContext


class MethodHandler(Protocol):
    """Handles one method's payload; raises ProtocolFailure for protocol problems."""

    source_name: str

    async def __call__(self, payload: dict[str, Any], ctx: RequestContext) -> HandlerResult: ...
