"""The two tool methods' handler (the spec's SubmitSingleValueHandler and
SubmitPairValuesHandler): one class, made once per entry kind, that finishes in the shared
submission workflow.

``submit_single_value``: ``{"parameter": name, "value": number}``.
``submit_pair_values``: ``{"pair": name, "value_1": number, "value_2": number}``; both values
are checked (type, finiteness, their leaf's rules) before the golden configuration is read, and
either may equal the golden's value as long as the other differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ax3l.shared import registry
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.registry import Entry, EntryKind
from ax3l.shared.wire import number_problem, payload_fields
from ax3l.toolbroker.results import HandlerResult, Rejected
from ax3l.toolbroker.submission import RequestContext, SubmissionWorkflow
from ax3l.toolbroker.value_rules import leaf_problems, require_fields, require_name


class MethodHandler(Protocol):
    """Handles one method's payload; raises ProtocolFailure for protocol problems."""

    source_name: str

    async def __call__(self, payload: dict[str, Any], ctx: RequestContext) -> HandlerResult: ...


@dataclass(frozen=True)
class _Kind:
    """How the handler's texts name an entry kind."""

    names: tuple[str, ...]  # the registry's entries of the kind
    what: str  # "single parameter"
    all_of_them: str  # "the single parameters"
    takes: str  # "one value"


KINDS: dict[EntryKind, _Kind] = {
    "single": _Kind(registry.SINGLES, "single parameter", "the single parameters", "one value"),
    "pair": _Kind(registry.PAIRS, "parameter pair", "the pairs", "two values"),
}


def _first(kind: EntryKind) -> Entry:
    return next(entry for entry in registry.ENTRIES if entry.kind == kind)


@dataclass(eq=False)
class SubmitHandler:
    """Checks the payload's fields, the live turn, the value(s) and the entry's name, then runs
    the workflow."""

    schema: ConfigSchema
    workflow: SubmissionWorkflow
    kind: EntryKind
    method: str = field(init=False)  # submit_single_value, submit_pair_values
    source_name: str = field(init=False)  # SubmitSingleValueHandler, SubmitPairValuesHandler
    fields: tuple[str, ...] = field(init=False)  # the payload's (``wire.payload_fields``)

    def __post_init__(self) -> None:
        self.method = _first(self.kind).tool_name
        self.source_name = "".join(word.title() for word in self.method.split("_")) + "Handler"
        self.fields = payload_fields(self.method)

    async def __call__(self, payload: dict[str, Any], ctx: RequestContext) -> HandlerResult:
        kind = KINDS[self.kind]
        require_fields(payload, self.fields, self.method)
        name = require_name(payload, self.fields[0], self.method)
        ctx = await self.workflow.enter_turn(ctx, name)
        known = name if name in registry.BY_NAME else None
        values = {value_name: payload[value_name] for value_name in self.fields[1:]}
        problems = [p for value_name, v in values.items() if (p := number_problem(value_name, v))]
        if problems:
            return await self._invalid(ctx, known, values, problems)
        if name not in kind.names:
            return await self._invalid(ctx, known, values, [self._wrong_name(name)])
        entry = registry.entry(name)
        for path, value_name in zip(entry.paths, entry.value_names, strict=True):
            found = leaf_problems(self.schema.by_path[path], values[value_name])
            if len(entry.paths) > 1:  # say which of the two values
                found = [f"{value_name} ({path}): {p.split(': ', 1)[-1]}" for p in found]
            problems.extend(found)
        if problems:
            return await self._invalid(ctx, name, values, problems)
        return await self.workflow.submit(ctx, entry, values)

    def _wrong_name(self, name: str) -> str:
        kind = KINDS[self.kind]
        other = next(k for k in KINDS if k != self.kind)
        if name in KINDS[other].names:
            return (
                f"{name} is a {KINDS[other].what}; it takes {KINDS[other].takes} through"
                f" {_first(other).tool_name}"
            )
        return (
            f"{name!r} is not a tunable {kind.what}; {kind.all_of_them} are {', '.join(kind.names)}"
        )

    async def _invalid(
        self, ctx: RequestContext, name: str | None, values: dict[str, Any], problems: list[str]
    ) -> Rejected:
        return await self.workflow.reject_invalid(ctx, name, values, "; ".join(problems))
