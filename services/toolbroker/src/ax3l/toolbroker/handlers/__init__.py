"""One handler per tool method (the spec's SubmitSingleValueHandler and
SubmitPairValuesHandler); both finish in the shared submission workflow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ax3l.shared import registry
from ax3l.shared.config_schema import ConfigSchema
from ax3l.toolbroker.results import HandlerResult
from ax3l.toolbroker.submission import RequestContext, SubmissionWorkflow
from ax3l.toolbroker.value_rules import require_fields, require_name


class MethodHandler(Protocol):
    """Handles one method's payload; raises ProtocolFailure for protocol problems."""

    source_name: str

    async def __call__(self, payload: dict[str, Any], ctx: RequestContext) -> HandlerResult: ...


@dataclass(eq=False)
class EntryHandler:
    """What both handlers do first: check the payload's fields and the entry's name, and bind
    the request to that entry's live turn (refused outside it)."""

    method: ClassVar[str]
    fields: ClassVar[tuple[str, ...]]
    name_field: ClassVar[str]

    schema: ConfigSchema
    workflow: SubmissionWorkflow

    async def admit(
        self, payload: dict[str, Any], ctx: RequestContext
    ) -> tuple[str, str | None, RequestContext]:
        """The named entry, the name if the registry knows it, and ``ctx`` in its turn."""
        require_fields(payload, self.fields, self.method)
        name = require_name(payload, self.name_field, self.method)
        ctx = await self.workflow.enter_turn(ctx, name)
        return name, (name if name in registry.BY_NAME else None), ctx
