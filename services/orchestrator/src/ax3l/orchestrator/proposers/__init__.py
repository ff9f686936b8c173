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
from ax3l.shared.settings import PROPOSER_NAMES, Settings


def make_proposer(name: str, deps: ProposerDeps, settings: Settings) -> Proposer:
    """The proposer called ``name`` (``llm`` and ``llm+tpe`` need ``settings.llm_url``)."""
    fallback = settings.llm_fallback
    if name == "llm":
        from ax3l.orchestrator.proposers.llm import LlmProposer

        model = LlmProposer(deps, settings)
        if fallback == "none":
            return model
        from ax3l.orchestrator.proposers.fallback import ModelWithFallback

        after = settings.llm_fallback_after
        return ModelWithFallback(deps, model, make_proposer(fallback, deps, settings), after)
    if name == "external":
        from ax3l.orchestrator.proposers.external import ExternalProposer, ExternalWithFallback

        seats = ExternalProposer(deps, settings)
        if fallback == "none":
            return seats
        other = make_proposer(fallback, deps, settings)
        return ExternalWithFallback(deps, seats, other, settings.external_deadline)
    if name == "llm+tpe":
        from ax3l.orchestrator.proposers.hybrid import HybridProposer

        backup = None if fallback == "none" else make_proposer(fallback, deps, settings)
        return HybridProposer(deps, settings, backup)
    if name == "random":
        from ax3l.orchestrator.proposers.random_search import RandomProposer

        return RandomProposer(deps, settings.max_corrections, settings.proposer_seed)
    if name == "tpe":
        from ax3l.orchestrator.proposers.tpe import TpeProposer

        return TpeProposer(deps, settings.max_corrections, settings.proposer_seed)
    raise ValueError(f"unknown proposer {name!r}; choose one of {', '.join(PROPOSER_NAMES)}")


__all__ = [
    "ConversationFailed",
    "Proposer",
    "ProposerDeps",
    "TurnContext",
    "make_proposer",
]
