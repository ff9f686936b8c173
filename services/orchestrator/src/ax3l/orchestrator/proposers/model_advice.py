"""The LLM of ``llm+model``: its prompt carries what the model of every run knows of the entry.

Before the request for a value the model is shown (prompt ``ModelAdvice``) a bounded table:
for at most ``ADVICE_ROWS`` open choices of the entry (all of them when there are no more;
else the ``BEST_ROWS`` with the highest expected improvement, the model proposer's ranking in
``proposers/model.py``, and the others spread evenly over the choices in value order), each
one's predicted mean high score over seeds +- its standard deviation with every other setting
as in the golden, and the seeds the value already ran on; the golden's own value as a
reference; and the model proposer's suggestion, the choice it would submit. The LLM may follow
it or overrule it. Below ``run_model.MIN_RUNS`` completed runs there is no model: no advice.

The advice is stored as the prompt it is (``prompt_sent``, ``ModelAdvice``), so the pages and
``ax3l-compare`` can tell whether an accepted value was the suggestion.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ax3l.orchestrator.prompts import Prompt, PromptContext
from ax3l.orchestrator.proposers.base import ProposerDeps
from ax3l.orchestrator.proposers.llm import LlmOptions, LlmProposer
from ax3l.orchestrator.proposers.model import Scored, score_choices
from ax3l.orchestrator.proposers.search_space import Key, Value, dimensions, key_of

ADVICE_SOURCE = "ModelAdvice"
ADVICE_ROWS = 12
BEST_ROWS = 4


def shown_choices(scored: list[Scored], rows: int = ADVICE_ROWS) -> list[Scored]:
    """The choices the table shows, in value order: the ``BEST_ROWS`` best by expected
    improvement, then choices spread evenly over the rest in value order, ``rows`` in all."""
    by_value = sorted(scored, key=lambda s: key_of(s.values))
    if len(by_value) <= rows:
        return by_value
    chosen = {key_of(s.values): s for s in scored[:BEST_ROWS]}
    others = [s for s in by_value if key_of(s.values) not in chosen]
    spread = rows - len(chosen)
    for i in range(spread):
        pick = others[round(i * (len(others) - 1) / max(1, spread - 1))]
        chosen.setdefault(key_of(pick.values), pick)
    return sorted(chosen.values(), key=lambda s: key_of(s.values))


def _seeds_by_value(prompt_ctx: PromptContext) -> dict[Key, list[int]]:
    found: dict[Key, set[int]] = {}
    for run in prompt_ctx.history.runs:
        if run.status == "completed":
            found.setdefault(run.key, set()).add(run.seed)
    return {key: sorted(seeds) for key, seeds in found.items()}


def _number(value: Value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _row(values: Sequence[Value], mean: float, sd: float, seeds: list[int]) -> str:
    cells = [_number(v) for v in values]
    ran = ", ".join(map(str, seeds)) if seeds else "none"
    return "| " + " | ".join([*cells, f"{mean:.1f} ± {sd:.1f}", ran]) + " |"


def advice_text(
    prompt_ctx: PromptContext, scored: list[Scored], golden: Any, runs: int, rows: int = ADVICE_ROWS
) -> str:
    """The ModelAdvice prompt's text: the suggestion, then the table of the ``rows`` best
    choices by expected improvement in value order, then the golden's value (``golden``: its
    estimate)."""
    paths = prompt_ctx.entry.paths
    seeds = _seeds_by_value(prompt_ctx)
    shown = shown_choices(scored, rows)
    best = scored[0]
    suggestion = json.dumps(dict(zip(paths, best.values, strict=True)))
    lines = [
        f"Advice from the model of every run (a Gaussian process fitted to all {runs} completed"
        " runs, every seed): for each value below, with every other setting as in the golden"
        " configuration, its predicted mean high score over seeds ± its standard deviation, and"
        " the seeds the value already ran on.",
        f"Its suggestion: {suggestion} (the highest expected improvement,"
        f" {best.gain:.2f}, over the best predicted mean so far, {best.incumbent:.1f}). You"
        " may follow it or choose differently.",
        "",
        "| " + " | ".join([*paths, "predicted mean ± sd", "seeds run"]) + " |",
        "|" + "---|" * (len(paths) + 2),
        *(
            _row(s.values, s.estimate.mean, s.estimate.sd, seeds.get(key_of(s.values), []))
            for s in shown
        ),
    ]
    if len(scored) > len(shown):
        lines.append(f"({len(scored) - len(shown)} further open values not shown.)")
    golden_values = prompt_ctx.history.golden_values
    golden_seeds = seeds.get(key_of(golden_values), [])
    lines.append(
        "The golden's own value, for reference: "
        + _row(golden_values, golden.mean, golden.sd, golden_seeds).strip("| ")
    )
    return "\n".join(lines)


class ModelAdvisedLlmProposer(LlmProposer):
    """The LLM with the model of every run's estimates for the entry in its prompt."""

    name = "llm+model"

    def __init__(self, deps: ProposerDeps, options: LlmOptions):
        super().__init__(deps, options)
        self.last_suggestion: tuple[Value, ...] | None = None

    async def advice(self, prompt_ctx: PromptContext) -> Prompt | None:
        from ax3l.shared.run_model import TooFewRuns

        models = self.deps.models
        golden = prompt_ctx.golden.config
        try:
            model = await models.current(golden)
        except TooFewRuns:
            self.last_suggestion = None
            return None
        excluded = prompt_ctx.history.tested_keys() | await self.deps.index.existing_values(
            prompt_ctx.entry, golden
        )
        excluded.add(key_of(prompt_ctx.history.golden_values))
        dims = dimensions(self.deps.schema, prompt_ctx.entry)
        point = models.space.values_of(golden)
        scored = score_choices(model, point, dims, excluded)
        if not scored:
            self.last_suggestion = None
            return None
        self.last_suggestion = scored[0].values
        (at_golden,) = model.predict([point])
        text = advice_text(prompt_ctx, scored, at_golden, len(model.records))
        return Prompt(ADVICE_SOURCE, text)
