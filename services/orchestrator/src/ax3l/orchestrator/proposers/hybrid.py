"""The hybrid proposers ``llm+tpe`` and ``llm+model``: a classical proposer keeps most turns
and shares its state with the LLM, which decides the others.

After the "Centaur" result (arXiv 2603.24647): the classical optimiser proposes most trials, and
on a share of the turns (``AX3L_LLM_SHARE``, default 0.3; more made the model worse there) the
LLM proposes with the classical proposer's state for the entry in its prompt. Under ``llm+tpe``
that is TPE's current top suggestions, its good/bad split of the trials, the best five
configurations and the last twenty trials (``TpeAdvice``); under ``llm+model`` the model of every
run's estimates and the model proposer's suggestion (``ModelAdvice``, ``model_advice.py``). The
LLM may follow it or not.

Who decides a turn is derived from durable state, never from memory: after ``n`` accepted
proposals the LLM decides when a draw seeded by ``AX3L_PROPOSER_SEED`` (0 when unset) and ``n``
falls below the share (``llm_decides``). A restart therefore gives the same turn to the same
proposer, and two arms of a comparison repeat (which share the seed) give the LLM the same
steps, whichever classical proposer they pair it with; a larger share keeps a smaller one's
steps. A turn the LLM keeps failing goes to ``AX3L_LLM_FALLBACK`` through the usual fallback
(``proposers/fallback.py``). ``conversation_started`` says who decided (``decided_by``: ``llm``
or the classical proposer's name; ``hybrid``: which hybrid; ``hybrid_role``: ``model`` or
``tpe`` under llm+tpe, ``llm`` or ``model`` under llm+model), and the advice prompt holds the
suggestions, so the pages can tell who proposed each accepted value and whether it matched one.
"""

from __future__ import annotations

import hashlib
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


def llm_decides(accepted_so_far: int, share: float, seed: int | None) -> bool:
    """Whether the LLM decides the turn after ``accepted_so_far`` accepted proposals: a uniform
    draw in [0, 1) from ``seed`` (``AX3L_PROPOSER_SEED``, 0 when unset) and the step, below
    ``share``."""
    digest = hashlib.sha256(f"ax3l-llm-share:{seed or 0}:{accepted_so_far}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


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
    """``llm+tpe`` or ``llm+model``: the classical proposer on most turns, the advised LLM on a
    share of them."""

    def __init__(
        self,
        deps: ProposerDeps,
        model: Proposer,
        classical: Proposer,
        share: float,
        seed: int | None,
        name: str = "llm+tpe",
    ):
        """``model``: the advised LLM, with ``AX3L_LLM_FALLBACK``'s proposer taking the turns
        it keeps failing (``ModelWithFallback``); ``classical``: TPE or the model proposer;
        ``share``: ``AX3L_LLM_SHARE``; ``seed``: ``AX3L_PROPOSER_SEED``."""
        super().__init__(deps)
        self.model, self.classical, self.share, self.seed = model, classical, share, seed
        self.name = name
        # The roles' names in conversation_started (llm+tpe keeps its first names).
        self.roles = ("model", "tpe") if name == "llm+tpe" else ("llm", classical.name)

    async def close(self) -> None:
        try:
            await self.model.close()
        finally:
            await self.classical.close()

    async def _llm_decides(self) -> bool:
        return llm_decides(await count(self.deps.db, ProposalAccepted), self.share, self.seed)

    def _note(self, note: dict[str, Any] | None, llm: bool) -> dict[str, Any]:
        return {
            **(note or {}),
            "hybrid": self.name,
            "hybrid_role": self.roles[0] if llm else self.roles[1],
            "decided_by": "llm" if llm else self.classical.name,
        }

    async def speculate(self, ahead: TurnAhead, note: dict[str, Any] | None = None) -> None:
        # The run that trains is accepted already: the count is the one ``ahead`` will see.
        if await self._llm_decides():
            await self.model.speculate(ahead, self._note(note, True))

    def held_entry(self) -> str | None:
        return self.model.held_entry()

    async def propose(self, ctx: TurnContext, note: dict[str, Any] | None = None) -> str:
        if await self._llm_decides():
            return await self.model.propose(ctx, self._note(note, True))
        return await self.classical.propose(ctx, self._note(note, False))

    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        raise NotImplementedError("HybridProposer delegates whole conversations")
