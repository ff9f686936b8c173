"""Which single parameter or pair this MCP session may submit (``AX3L_CONVERSATION_PARAMETER``).

Ax3l starts one session per conversation with the variable set to a round-robin entry.
Without it (or with an unknown name) the tools are still listed, so a client can discover
them, but every submission is refused. A single assignment refuses pair submissions and a
pair assignment refuses single ones.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ax3l.shared import registry
from ax3l.shared.registry import Entry, EntryKind

BINDING_ENV = "AX3L_CONVERSATION_PARAMETER"


@dataclass(frozen=True)
class Binding:
    """The session's assignment: a registry entry, or None with the raw variable value."""

    entry: Entry | None
    raw: str

    def refusal(self, kind: EntryKind) -> str | None:
        """Why a ``kind`` submission is refused in this session, or None if it is allowed."""
        if self.entry is None:
            if not self.raw:
                return (
                    "This MCP session has no assigned parameter, so it cannot submit values:"
                    f" Ax3l sets {BINDING_ENV} for each conversation's session. Unbound"
                    " sessions may only list the tools."
                )
            return (
                f"{BINDING_ENV}={self.raw!r} is not a tunable parameter or pair (known:"
                f" {', '.join(registry.PARAMETER_ORDER)}), so this session cannot submit"
                " values."
            )
        if self.entry.kind == kind:
            return None
        if self.entry.kind == "pair":
            return (
                f"This session is assigned the parameter pair {self.entry.name}: submit its two"
                " values with submit_pair_values(value_1, value_2), not submit_single_value."
            )
        return (
            f"This session is assigned the single parameter {self.entry.name}: submit one value"
            " with submit_single_value(value), not submit_pair_values."
        )


def binding_from_env(environ: Mapping[str, str] | None = None) -> Binding:
    """The binding named by the environment (``os.environ`` by default)."""
    raw = (os.environ if environ is None else environ).get(BINDING_ENV, "").strip()
    return Binding(registry.BY_NAME.get(raw), raw)
