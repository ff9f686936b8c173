"""The ``random`` proposer: a uniformly random untested choice, submitted through the MCP tool."""

from __future__ import annotations

import random
from collections.abc import Sequence

from ax3l.orchestrator.comparable_history import ComparableHistory, load_history
from ax3l.orchestrator.mcp_session import BoundSession
from ax3l.orchestrator.proposers.base import (
    ConversationFailed,
    Proposer,
    ProposerDeps,
    TurnContext,
)
from ax3l.orchestrator.proposers.search_space import (
    Dimension,
    Key,
    Value,
    dimensions,
    key_of,
    random_untested,
)
from ax3l.shared.crash_points import crash_point


class RandomProposer(Proposer):
    name = "random"

    def __init__(self, deps: ProposerDeps, max_corrections: int, seed: int | None = None):
        super().__init__(deps)
        self.max_corrections = max_corrections  # AX3L_MAX_CORRECTIONS: rejections allowed
        self.rng = random.Random(seed)  # AX3L_PROPOSER_SEED (None: a fresh seed)

    def choose(
        self, dims: Sequence[Dimension], history: ComparableHistory, excluded: set[Key]
    ) -> tuple[Value, ...] | None:
        """The next values to submit; None when every choice was tried."""
        return random_untested(dims, excluded, self.rng)

    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        deps = self.deps
        entry = ctx.turn.entry
        history = await load_history(deps.db, deps.schema, entry, ctx.golden.config)
        excluded = history.tested_keys() | await deps.index.existing_values(
            entry, ctx.golden.config
        )
        excluded.add(key_of(history.golden_values))
        dims = dimensions(deps.schema, entry)
        async with deps.sessions.session(entry, self.sessions) as session:
            rejections = 0
            while True:
                values = self.choose(dims, history, excluded)
                if values is None:
                    raise ConversationFailed(f"no untested choice of {entry.name} is left")
                result = await session.call(_arguments(session, entry.value_names, values))
                deps.capture.record(conversation_id, "tool_result", result.payload)
                if result.accepted:
                    crash_point("after_tool_accepted")
                    return str(result.payload["run_id"])
                if not result.rejected:
                    raise ConversationFailed(f"{session.tool.name} answered {result.text}")
                excluded.add(key_of(values))
                rejections += 1
                if rejections > self.max_corrections:
                    raise ConversationFailed(
                        f"{rejections} proposals rejected; last: {result.payload.get('reason')}"
                    )


def _arguments(
    session: BoundSession, value_names: Sequence[str], values: Sequence[Value]
) -> dict[str, Value]:
    """Values keyed by the discovered tool's argument names (registry order when they match)."""
    names = session.tool.argument_names
    order = tuple(value_names) if set(names) == set(value_names) else names
    return dict(zip(order, values, strict=True))
