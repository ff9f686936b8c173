"""SubmitSingleValueHandler: ``{"parameter": name, "value": number}``."""

from __future__ import annotations

from typing import Any

from ax3l.shared import registry
from ax3l.toolbroker.handlers import EntryHandler
from ax3l.toolbroker.results import HandlerResult
from ax3l.toolbroker.submission import RequestContext
from ax3l.toolbroker.value_rules import leaf_problems, number_problem

METHOD = "submit_single_value"
FIELDS = ("parameter", "value")


class SubmitSingleValueHandler(EntryHandler):
    """Checks the payload, the live turn, the value and the parameter name, then runs the
    workflow."""

    source_name = "SubmitSingleValueHandler"
    method = METHOD
    fields = FIELDS
    name_field = "parameter"

    async def __call__(self, payload: dict[str, Any], ctx: RequestContext) -> HandlerResult:
        name, known, ctx = await self.admit(payload, ctx)
        value = payload["value"]
        problem = number_problem("value", value)
        if problem:
            return await self.workflow.reject_invalid(ctx, known, {"value": value}, problem)
        if name not in registry.SINGLES:
            if name in registry.PAIRS:
                reason = (
                    f"{name} is a parameter pair; it takes two values through submit_pair_values"
                )
            else:
                reason = (
                    f"{name!r} is not a tunable single parameter; the single parameters are"
                    f" {', '.join(registry.SINGLES)}"
                )
            return await self.workflow.reject_invalid(ctx, known, {"value": value}, reason)
        entry = registry.entry(name)
        problems = leaf_problems(self.schema.by_path[entry.paths[0]], value)
        if problems:
            return await self.workflow.reject_invalid(
                ctx, name, {"value": value}, "; ".join(problems)
            )
        return await self.workflow.submit(ctx, entry, {"value": value})
