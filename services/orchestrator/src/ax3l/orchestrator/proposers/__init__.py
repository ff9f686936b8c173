"""Proposers: where a turn's proposal comes from (the LLM, or a classical baseline).

Every proposer opens a bound MCP session and submits through the same tool, so the broker's
validation, dedupe and submission path is the same whoever proposes.
"""

from __future__ import annotations

from ax3l.orchestrator.proposers.base import (
    ConversationFailed,
    Proposer,
    ProposerDeps,
    TurnContext,
)
from ax3l.shared.settings import PROPOSER_NAMES


def make_proposer(name: str, deps: ProposerDeps) -> Proposer:
    """The proposer called ``name`` (``llm`` and ``llm+tpe`` need ``deps.settings.llm_url``)."""
    if name == "llm":
        from ax3l.orchestrator.proposers.llm import LlmProposer

        model = LlmProposer(deps)
        fallback = deps.settings.llm_fallback
        if fallback == "none":
            return model
        from ax3l.orchestrator.proposers.fallback import ModelWithFallback

        return ModelWithFallback(
            deps, model, make_proposer(fallback, deps), deps.settings.llm_fallback_after
        )
    if name == "external":
        from ax3l.orchestrator.proposers.external import ExternalProposer, ExternalWithFallback

        seats = ExternalProposer(deps)
        if deps.settings.llm_fallback == "none":
            return seats
        return ExternalWithFallback(deps, seats, make_proposer(deps.settings.llm_fallback, deps))
    if name == "llm+tpe":
        from ax3l.orchestrator.proposers.hybrid import HybridProposer

        fallback = deps.settings.llm_fallback
        return HybridProposer(deps, None if fallback == "none" else make_proposer(fallback, deps))
    if name == "random":
        from ax3l.orchestrator.proposers.random_search import RandomProposer

        return RandomProposer(deps)
    if name == "tpe":
        from ax3l.orchestrator.proposers.tpe import TpeProposer

        return TpeProposer(deps)
    raise ValueError(f"unknown proposer {name!r}; choose one of {', '.join(PROPOSER_NAMES)}")


__all__ = [
    "ConversationFailed",
    "Proposer",
    "ProposerDeps",
    "TurnContext",
    "make_proposer",
]
