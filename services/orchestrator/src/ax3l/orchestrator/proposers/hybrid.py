"""The hybrid proposer ``llm+tpe``: TPE keeps most turns and shares its state with the model.

After the "Centaur" result (arXiv 2603.24647): the classical optimiser proposes most trials, and
on a share of the turns (``AX3L_HYBRID_MODEL_SHARE``, default 0.3; more made the model worse
there) the model proposes with TPE's state for the entry in its prompt: TPE's current top
suggestions, its good/bad split of the trials, the best five configurations and the last twenty
trials, said to come from TPE. The model may follow it or not.

Who proposes a turn is derived from durable state, never from memory: the model takes the turn
when the number of accepted proposals so far, ``n``, makes ``floor((n + 1) * share)`` step past
``floor(n * share)``. A restart therefore gives the same turn to the same proposer. A model turn
that the model keeps failing goes to TPE through the usual fallback (``proposers/fallback.py``).
``conversation_started`` says the role (``hybrid_role``: ``model`` or ``tpe``), and the model's
``TpeAdvice`` prompt event holds TPE's suggestions, so the pages can tell who proposed each
accepted value and whether it matched a suggestion.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ax3l.orchestrator.comparable_history import ComparableHistory
from ax3l.orchestrator.prompts import Prompt, PromptContext
from ax3l.orchestrator.proposers.base import Proposer, ProposerDeps, TurnAhead, TurnContext
from ax3l.orchestrator.proposers.llm import LlmOptions, LlmProposer
from ax3l.orchestrator.proposers.search_space import Key, Value, dimensions, key_of
from ax3l.orchestrator.proposers.tpe import TpeProposer
from ax3l.shared.db.event_reads import count
from ax3l.shared.event_models import ProposalAccepted

SUGGESTIONS = 3
BEST = 5
LATEST = 20


def model_takes_turn(accepted_so_far: int, share: float) -> bool:
    """Whether the model proposes the turn after ``accepted_so_far`` accepted proposals."""
    return math.floor((accepted_so_far + 1) * share) > math.floor(accepted_so_far * share)


def good_count(trials: int) -> int:
    """TPE's split: the best ``min(ceil(0.1 n), 25)`` trials are "good" (Optuna's default)."""
    return min(math.ceil(0.1 * trials), 25) if trials else 0


def tpe_state(
    tpe: TpeProposer, schema: Any, history: ComparableHistory, excluded: set[Key]
) -> dict[str, Any]:
    """What TPE knows about the entry now: its suggestions and its view of the trials."""
    entry = history.entry
    dims = dimensions(schema, entry)
    names = [dim.leaf.path for dim in dims]
    suggestions: list[tuple[Value, ...]] = []
    seen = set(excluded)
    for _ in range(SUGGESTIONS):
        values = tpe.choose(dims, history, seen)
        if values is None:
            break
        suggestions.append(values)
        seen.add(key_of(values))
    scored = [r for r in history.current_seed() if r.high_score is not None]
    ranked = sorted(scored, key=lambda r: -(r.high_score or 0))
    good = good_count(len(ranked))

    def trial(run: Any) -> dict[str, Any]:
        return {**dict(zip(names, run.values, strict=True)), "high_score": run.high_score}

    return {
        "suggestions": [dict(zip(names, s, strict=True)) for s in suggestions],
        "trials": len(ranked),
        "good_trials": good,
        "good_threshold": ranked[good - 1].high_score if good else None,
        "best": [trial(r) for r in ranked[:BEST]],
        "latest": [trial(r) for r in scored[-LATEST:]],
    }


def advice_prompt(state: dict[str, Any]) -> Prompt:
    """The prompt that hands TPE's state to the model."""
    text = (
        "Advice from a classical optimiser (TPE, Optuna's Tree-structured Parzen Estimator)"
        " that has modelled this setting's results on the current seed. Its suggestions for"
        " the next value, best first, and its view of the trials (the best"
        f" {state['good_trials']} of {state['trials']} count as good"
        + (f", scoring at least {state['good_threshold']}" if state["good_threshold"] else "")
        + "). You may follow a suggestion or choose differently.\n\n```json\n"
        + json.dumps(
            {
                "suggestions": state["suggestions"],
                "best_trials": state["best"],
                "latest_trials": state["latest"],
            },
            indent=1,
        )
        + "\n```"
    )
    return Prompt("TpeAdvice", text)


class AdvisedLlmProposer(LlmProposer):
    """The LLM with TPE's state for the entry in its prompt."""

    name = "llm+tpe"

    def __init__(self, deps: ProposerDeps, options: LlmOptions, tpe: TpeProposer):
        super().__init__(deps, options)
        self.tpe = tpe
        self.last_state: dict[str, Any] | None = None

    async def advice(self, prompt_ctx: PromptContext) -> Prompt | None:
        excluded = prompt_ctx.history.tested_keys() | await self.deps.index.existing_values(
            prompt_ctx.entry, prompt_ctx.golden.config
        )
        excluded.add(key_of(prompt_ctx.history.golden_values))
        self.last_state = tpe_state(self.tpe, self.deps.schema, prompt_ctx.history, excluded)
        return advice_prompt(self.last_state)


class HybridProposer(Proposer):
    """``llm+tpe``: TPE on most turns, the TPE-advised model on a share of them."""

    name = "llm+tpe"

    def __init__(self, deps: ProposerDeps, model: Proposer, tpe: TpeProposer, share: float):
        """``model``: the ``AdvisedLlmProposer``, with ``AX3L_LLM_FALLBACK``'s proposer taking
        the turns it keeps failing (``ModelWithFallback``); ``share``:
        ``AX3L_HYBRID_MODEL_SHARE``."""
        super().__init__(deps)
        self.model, self.tpe, self.share = model, tpe, share

    async def close(self) -> None:
        try:
            await self.model.close()
        finally:
            await self.tpe.close()

    async def _accepted_so_far(self) -> int:
        return await count(self.deps.db, ProposalAccepted)

    async def speculate(self, ahead: TurnAhead, note: dict[str, Any] | None = None) -> None:
        # The run that trains is accepted already: the count is the one ``ahead`` will see.
        if model_takes_turn(await self._accepted_so_far(), self.share):
            await self.model.speculate(ahead, {**(note or {}), "hybrid_role": "model"})

    def held_entry(self) -> str | None:
        return self.model.held_entry()

    async def propose(self, ctx: TurnContext, note: dict[str, Any] | None = None) -> str:
        if model_takes_turn(await self._accepted_so_far(), self.share):
            return await self.model.propose(ctx, {**(note or {}), "hybrid_role": "model"})
        return await self.tpe.propose(ctx, {**(note or {}), "hybrid_role": "tpe"})

    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        raise NotImplementedError("HybridProposer delegates whole conversations")
