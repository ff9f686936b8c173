"""SubmitPairValuesHandler: ``{"pair": name, "value_1": number, "value_2": number}``.

Both values are checked (type, finiteness, their leaf's rules) before the golden
configuration is read; either may equal the golden's value as long as the other differs.
"""

from __future__ import annotations

from typing import Any

from ax3l.shared import registry
from ax3l.toolbroker.handlers import EntryHandler
from ax3l.toolbroker.results import HandlerResult
from ax3l.toolbroker.submission import RequestContext
from ax3l.toolbroker.value_rules import leaf_problems, number_problem

METHOD = "submit_pair_values"
FIELDS = ("pair", "value_1", "value_2")


class SubmitPairValuesHandler(EntryHandler):
    """Checks the payload, the live turn, both values and the pair name, then runs the
    workflow."""

    source_name = "SubmitPairValuesHandler"
    method = METHOD
    fields = FIELDS
    name_field = "pair"

    async def __call__(self, payload: dict[str, Any], ctx: RequestContext) -> HandlerResult:
        name, known, ctx = await self.admit(payload, ctx)
        values = {"value_1": payload["value_1"], "value_2": payload["value_2"]}
        problems = [p for field, v in values.items() if (p := number_problem(field, v))]
        if problems:
            return await self.workflow.reject_invalid(ctx, known, values, "; ".join(problems))
        if name not in registry.PAIRS:
            if name in registry.SINGLES:
                reason = (
                    f"{name} is a single parameter; it takes one value through submit_single_value"
                )
            else:
                reason = (
                    f"{name!r} is not a tunable parameter pair; the pairs are"
                    f" {', '.join(registry.PAIRS)}"
                )
            return await self.workflow.reject_invalid(ctx, known, values, reason)
        entry = registry.entry(name)
        for path, field in zip(entry.paths, entry.value_names, strict=True):
            problems.extend(
                f"{field} ({path}): {problem.split(': ', 1)[-1]}"
                for problem in leaf_problems(self.schema.by_path[path], values[field])
            )
        if problems:
            return await self.workflow.reject_invalid(ctx, name, values, "; ".join(problems))
        return await self.workflow.submit(ctx, entry, values)
