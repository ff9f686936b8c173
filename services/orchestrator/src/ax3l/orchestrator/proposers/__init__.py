"""Proposers: where a turn's proposal comes from (the LLM, or a classical baseline).

Every proposer opens a bound MCP session and submits through the same tool, so the broker's
validation, dedupe and submission path is the same whoever proposes.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ax3l.orchestrator.proposers.base import (
    ConversationFailed,
    Proposer,
    ProposerDeps,
    TurnContext,
)
from ax3l.shared.settings import PROPOSER_NAMES, OrchestratorSettings

if TYPE_CHECKING:
    from ax3l.orchestrator.proposers.llm import LlmOptions


def llm_options(settings: OrchestratorSettings) -> LlmOptions:
    """The settings the LLM proposer reads (its fields' names); it needs ``AX3L_LLM_URL``."""
    from ax3l.orchestrator.proposers.llm import LlmOptions

    if not settings.llm_url:
        raise ValueError("the llm proposer needs a model server URL (--url or AX3L_LLM_URL)")
    return LlmOptions(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(LlmOptions)})


def make_proposer(name: str, deps: ProposerDeps, settings: OrchestratorSettings) -> Proposer:
    """The proposer called ``name`` (``llm``, ``llm+tpe`` and ``llm+model`` need
    ``settings.llm_url``): the one
    place that reads the proposers' settings (the external proposer's own excepted)."""
    fallback = settings.llm_fallback
    corrections, seed = settings.max_corrections, settings.proposer_seed
    if name in ("llm", "llm+tpe", "llm+model"):
        from ax3l.orchestrator.proposers.fallback import ModelWithFallback

        options = llm_options(settings)
        classical: Proposer | None = None
        if name == "llm":
            from ax3l.orchestrator.proposers.llm import LlmProposer

            model: Proposer = LlmProposer(deps, options)
        elif name == "llm+tpe":
            from ax3l.orchestrator.proposers.hybrid import AdvisedLlmProposer
            from ax3l.orchestrator.proposers.tpe import TpeProposer

            model = AdvisedLlmProposer(deps, options, TpeProposer(deps, corrections, seed))
            classical = TpeProposer(deps, corrections, seed)
        else:
            from ax3l.orchestrator.proposers.model import ModelProposer
            from ax3l.orchestrator.proposers.model_advice import ModelAdvisedLlmProposer

            model = ModelAdvisedLlmProposer(deps, options)
            classical = ModelProposer(deps, corrections, seed)
        if fallback != "none":
            other = make_proposer(fallback, deps, settings)
            model = ModelWithFallback(deps, model, other, settings.llm_fallback_after)
        if classical is None:
            return model
        from ax3l.orchestrator.proposers.hybrid import HybridProposer

        return HybridProposer(deps, model, classical, settings.llm_share, seed, name)
    if name == "external":
        from ax3l.orchestrator.proposers.external import ExternalProposer, ExternalWithFallback

        seats = ExternalProposer(deps, settings)
        if fallback == "none":
            return seats
        other = make_proposer(fallback, deps, settings)
        return ExternalWithFallback(deps, seats, other, settings.external_deadline)
    if name == "random":
        from ax3l.orchestrator.proposers.random_search import RandomProposer

        return RandomProposer(deps, corrections, seed)
    if name == "model":
        from ax3l.orchestrator.proposers.model import ModelProposer

        return ModelProposer(deps, corrections, seed)
    if name == "tpe":
        from ax3l.orchestrator.proposers.tpe import TpeProposer

        return TpeProposer(deps, corrections, seed)
    raise ValueError(f"unknown proposer {name!r}; choose one of {', '.join(PROPOSER_NAMES)}")


__all__ = [
    "ConversationFailed",
    "Proposer",
    "ProposerDeps",
    "TurnContext",
    "make_proposer",
]
