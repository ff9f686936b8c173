"""The conversation prompts, in this project's own words.

Every conversation opens with ProjectContext. The first conversation of an experiment (before
any proposal was accepted) adds FirstContact. Singles then get Comparison and FirstContactSingle
(first conversation) or ComparisonSingle (later); the pairs get their report
(ComparisonEpsilonPair / ComparisonRewardPair) and their instructions (FirstContactEpsilonPair /
FirstContactRewardPair). Each prompt is one message and is stored exactly as sent; the class
name is its ``source_name``. Correction prompts (InvalidValue, NoDupes) come from the broker.

Given a token budget, the comparable history is summarised until the prompts fit: first the
earlier seeds are aggregated per value (runs, best, mean), then only the values that matter most
are kept (see ``ComparableHistory.priority``) and a line says what was left out. The JSON block
is always whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from ax3l.orchestrator.comparable_history import (
    CURRENT_RUNS_SHOWN,
    ComparableHistory,
    HistorySummary,
    load_history,
)
from ax3l.orchestrator.prompt_budget import MESSAGE_TOKENS, fits, messages_tokens, shrunk_budget
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import latest
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.shared.registry import Entry


@dataclass(frozen=True)
class Prompt:
    """One message of a conversation; ``source_name`` is the prompt class."""

    source_name: str
    text: str
    role: str = "user"


@dataclass(frozen=True)
class PromptContext:
    """Everything a conversation's prompts are made of."""

    entry: Entry
    schema: ConfigSchema
    golden: GoldenConfigCreated
    history: ComparableHistory
    first_conversation: bool
    tool_name: str
    argument_names: tuple[str, ...]
    summary: HistorySummary | None = None  # what the reports show; None: the whole history

    @classmethod
    def of(
        cls,
        schema: ConfigSchema,
        golden: GoldenConfigCreated,
        history: ComparableHistory,
        first_conversation: bool,
    ) -> PromptContext:
        """The context of the history's entry, its tool named as the registry names it."""
        entry = history.entry
        return cls(
            entry, schema, golden, history, first_conversation, entry.tool_name, entry.value_names
        )


async def read_prompt_context(
    db: Database, schema: ConfigSchema, entry: Entry, golden: GoldenConfigCreated
) -> PromptContext:
    """The context of a turn's prompts as the events stand: the entry's comparable history,
    whether this is the experiment's first conversation, and the registry's tool names."""
    history = await load_history(db, schema, entry, golden.config)
    first = await latest(db, "proposal_accepted") is None
    return PromptContext.of(schema, golden, history, first)


def _history(ctx: PromptContext) -> HistorySummary:
    return ctx.summary if ctx.summary is not None else ctx.history.summary()


def _omitted_line(ctx: PromptContext, summary: HistorySummary) -> str:
    if not summary.omitted_values:
        return ""
    best = summary.omitted_best_high_score
    return (
        f"\nLeft out to fit the model's context: {summary.omitted_values} further tested values"
        f" ({summary.omitted_runs} runs, {summary.omitted_current_seed_values} of the values run"
        f" on seed {ctx.golden.seed}; best high score among them:"
        f" {best if best is not None else 'none'}). A value already run on seed"
        f" {ctx.golden.seed} is refused even when it is not listed."
    )


def _number(value: Any) -> str:
    return json.dumps(value)


def _golden_value(ctx: PromptContext, path: str) -> Any:
    return ctx.schema.get(ctx.golden.config, path)


def _leaf_block(ctx: PromptContext, path: str, argument: str | None = None) -> str:
    leaf = ctx.schema.by_path[path]
    head = f"- {path}" + (f" (tool argument `{argument}`)" if argument else "")
    description = leaf.description.strip() or leaf.title
    return f"{head}: {description}\n  Allowed: {leaf.rules_text()}."


def project_context(ctx: PromptContext) -> Prompt:
    epochs = ctx.golden.config.get("epochs")
    episodes = f" for {epochs} episodes" if epochs is not None else ""
    return Prompt(
        "ProjectContext",
        "You are the tuning assistant of Ax3l. Ax3l runs the Snake reinforcement-learning"
        ' project from Patrick Loeber\'s tutorial "Train an AI to Play Snake": a snake on a'
        " 20 x 20 board learns by deep Q-learning (here a recurrent network) to find food."
        f" Every simulation trains a fresh agent{episodes} and is scored by its high score, the"
        " most food eaten in any single episode.\n"
        "You are the one who chooses the hyperparameters. In each conversation Ax3l assigns"
        " you one parameter or one pair of parameters. You pick the new value(s); Ax3l copies"
        " the golden configuration (the best configuration found so far), changes only what"
        " you chose, and trains it. A run that beats the golden high score becomes the new"
        " golden configuration.\n"
        "Answer only by calling the tool you are given, exactly once, with numbers.",
        role="system",
    )


def first_contact(ctx: PromptContext) -> Prompt:
    return Prompt(
        "FirstContact",
        "This is the first conversation of a new experiment. The goal is to raise the high"
        " score, one parameter (or pair) at a time, in a round robin over hidden size,"
        " sequence length, batch size, learning rate, gamma, the epsilon pair and the reward"
        " pair. Do not be afraid of values that may score poorly: a weak result still shows"
        " where the good region is not, and that is worth a run.",
    )


def _golden_line(ctx: PromptContext) -> str:
    golden = ctx.golden
    return (
        f"Golden configuration: run {golden.run_id} on seed {golden.seed}, high score"
        f" {golden.high_score}."
    )


def comparison(ctx: PromptContext) -> Prompt:
    """The single's golden value and score, then the comparable runs as JSON."""
    path = ctx.entry.paths[0]
    summary = _history(ctx)
    if summary.summarised:
        # One value per line: the same JSON in about half the tokens of the indented form.
        report = "[\n" + ",\n".join(json.dumps(group) for group in summary.groups) + "\n]"
    else:
        report = json.dumps(summary.groups, indent=2)
    earlier = (
        "the number of runs on earlier seeds with their best and mean high score"
        if summary.summarised
        else "the high scores on earlier seeds"
    )
    if any("current_seed_older" in group for group in summary.groups):
        earlier += (
            f" (a value with more than {CURRENT_RUNS_SHOWN} runs on this seed lists its latest"
            " and sums up the older ones in `current_seed_older` the same way)"
        )
    return Prompt(
        "Comparison",
        f"Assigned parameter: {ctx.entry.name} ({path}).\n"
        f"{_golden_line(ctx)} Its {path} is {_number(_golden_value(ctx, path))}.\n"
        f"Runs that differ from the golden configuration only in {path} (and possibly the"
        " seed), per tested value: `current_seed` lists the runs on the current seed"
        f" {ctx.golden.seed} (status and high score), `earlier_seeds` {earlier}, which are"
        " not directly comparable:\n"
        f"```json\n{report}\n```{_omitted_line(ctx, summary)}",
    )


def _single_request(ctx: PromptContext) -> str:
    argument = ctx.argument_names[0] if ctx.argument_names else "value"
    return (
        f'Call `{ctx.tool_name}` with {{"{argument}": <number>}}. Choose a value that has'
        f" no run on seed {ctx.golden.seed} yet: a value already run on this seed, or the"
        " golden value itself, is refused."
    )


# What each single's instructions advise; ``{path}`` is the parameter.
SINGLE_ADVICE = {
    "FirstContactSingle": "Pick the value of {path} you expect to score best, or the one whose"
    " result would teach the most.",
    "ComparisonSingle": "Use the high-score history above to choose the next value of {path}:"
    " move towards what scored well, or test a region nobody has tried.",
}


def _single(ctx: PromptContext, source_name: str) -> Prompt:
    """A single's instructions: the parameter, its leaf, the advice, the request."""
    path = ctx.entry.paths[0]
    advice = SINGLE_ADVICE[source_name].format(path=path)
    return Prompt(
        source_name,
        f"Your parameter is {path}.\n{_leaf_block(ctx, path)}\n{advice} {_single_request(ctx)}",
    )


def first_contact_single(ctx: PromptContext) -> Prompt:
    return _single(ctx, "FirstContactSingle")


def comparison_single(ctx: PromptContext) -> Prompt:
    return _single(ctx, "ComparisonSingle")


def _pair_report(ctx: PromptContext, title: str) -> str:
    first, second = ctx.entry.paths
    lines = [
        f"Assigned pair: {ctx.entry.name} ({first} and {second}).",
        f"{_golden_line(ctx)} Its {first} is {_number(_golden_value(ctx, first))} and its"
        f" {second} is {_number(_golden_value(ctx, second))}.",
        f"{title} that differ from the golden configuration only in this pair (and possibly"
        " the seed):",
        "",
        f"| {first} | {second} | seed {ctx.golden.seed} runs | earlier seeds |",
        "|---|---|---|---|",
    ]
    summary = _history(ctx)
    for group in summary.groups:
        current = ", ".join(
            f"{_score(r['high_score'])} ({r['status']})" for r in group["current_seed"]
        )
        if "current_seed_older" in group:
            current += f"; older: {_aggregate_text(group['current_seed_older'])}"
        if summary.summarised:
            earlier = _aggregate_text(group["earlier_seeds"])
        else:
            earlier = ", ".join(
                f"seed {r['seed']}: {_score(r['high_score'])}" for r in group["earlier_seeds"]
            )
        lines.append(
            f"| {_number(group[first])} | {_number(group[second])} | {current or 'none'}"
            f" | {earlier or 'none'} |"
        )
    if not summary.groups:
        lines.append("| - | - | none | none |")
    return "\n".join(lines) + _omitted_line(ctx, summary)


def _score(high_score: int | None) -> str:
    return str(high_score) if high_score is not None else "-"


def _aggregate_text(aggregate: dict[str, Any]) -> str:
    if not aggregate["runs"]:
        return ""
    runs = f"{aggregate['runs']} run" + ("s" if aggregate["runs"] != 1 else "")
    if aggregate["best"] is None:
        return f"{runs}, no score"
    return f"{runs}, best {aggregate['best']}, mean {aggregate['mean']}"


def _pair_names(ctx: PromptContext) -> tuple[str, ...]:
    """The tool's two argument names (``value_1``, ``value_2`` when it does not say)."""
    return ctx.argument_names if len(ctx.argument_names) == 2 else ("value_1", "value_2")


def _pair_request(ctx: PromptContext) -> str:
    first, second = ctx.entry.paths
    names = _pair_names(ctx)
    return (
        f'Call `{ctx.tool_name}` with {{"{names[0]}": <{first}>, "{names[1]}": <{second}>}}.'
        " One of the two may keep its golden value if the other changes. A pair already run on"
        f" seed {ctx.golden.seed} is refused."
    )


def comparison_epsilon_pair(ctx: PromptContext) -> Prompt:
    return Prompt("ComparisonEpsilonPair", _pair_report(ctx, "Exploration settings tested"))


def _first_contact_pair(ctx: PromptContext, source_name: str, what: str, advice: str) -> Prompt:
    """A pair's first prompt: what the pair does, both leaves, the advice, the request."""
    first, second = ctx.entry.paths
    names = _pair_names(ctx)
    return Prompt(
        source_name,
        f"{what}\n{_leaf_block(ctx, first, names[0])}\n{_leaf_block(ctx, second, names[1])}\n"
        f"{advice} {_pair_request(ctx)}",
    )


def first_contact_epsilon_pair(ctx: PromptContext) -> Prompt:
    return _first_contact_pair(
        ctx,
        "FirstContactEpsilonPair",
        "Your pair sets the exploration schedule: the agent starts by acting at random with"
        " probability epsilon, and epsilon shrinks after every episode.",
        "A high initial value with a slow decay explores for long; a fast decay exploits"
        " early. Choose both values together.",
    )


def comparison_reward_pair(ctx: PromptContext) -> Prompt:
    return Prompt("ComparisonRewardPair", _pair_report(ctx, "Reward shapes tested"))


def first_contact_reward_pair(ctx: PromptContext) -> Prompt:
    return _first_contact_pair(
        ctx,
        "FirstContactRewardPair",
        "Your pair shapes the reward for every move that neither eats nor dies: a bonus for"
        " moving closer to the food and a penalty for moving away from it.",
        "Strong shaping speeds up learning to chase food but can teach the snake to trap"
        " itself; weak shaping leaves it to the food reward.",
    )


PAIR_PROMPTS = {
    "epsilon_pair": (comparison_epsilon_pair, first_contact_epsilon_pair),
    "reward_pair": (comparison_reward_pair, first_contact_reward_pair),
}


def conversation_prompts(
    ctx: PromptContext, budget_tokens: int | None = None, shrink: int = 0
) -> list[Prompt]:
    """The opening prompts of a conversation, in the order they are sent.

    With ``budget_tokens`` (see ``prompt_budget.prompt_token_budget``) the history is summarised
    until the prompts' estimated tokens fit it. ``shrink`` > 0, after the server refused a
    request as too long, halves the budget per level (the whole prompt's estimate when no budget
    is given). Without either the whole history is shown. Deterministic.
    """
    if budget_tokens is None and shrink == 0:
        return _prompts(ctx)
    if budget_tokens is None:
        budget_tokens = prompts_tokens(_prompts(ctx))
    return fitted_prompts(ctx, shrunk_budget(budget_tokens, shrink))


def prompts_tokens(prompts: list[Prompt]) -> int:
    """The estimated tokens of these messages, template tokens included."""
    return messages_tokens([prompt.text for prompt in prompts])


def _fit(prompts: list[Prompt], budget_tokens: int) -> bool:
    text_budget = budget_tokens - MESSAGE_TOKENS * len(prompts)
    return fits("".join(prompt.text for prompt in prompts), text_budget)


# No value group and no listed run of the history's report costs fewer estimated tokens.
MIN_ITEM_TOKENS = 6


def fitted_prompts(ctx: PromptContext, budget_tokens: int) -> list[Prompt]:
    """The prompts with the largest summary of the history that fits ``budget_tokens``.

    In order: the whole history; earlier seeds aggregated per value; the ``k`` values first in
    the history's priority, for the largest ``k`` that fits (found by doubling, then bisecting,
    so a long history costs about as much as what is shown); no values at all.
    """
    history = ctx.history

    def attempt(summarised: bool, keep: int | None) -> list[Prompt]:
        return _prompts(replace(ctx, summary=history.summary(summarised, keep)))

    for summarised in (False, True):
        # Every value and every listed run costs a few tokens: a history that cannot fit is
        # not rendered in full to find that out.
        if history.size_floor(summarised) * MIN_ITEM_TOKENS > budget_tokens:
            continue
        prompts = attempt(summarised, None)
        if _fit(prompts, budget_tokens):
            return prompts
    total = len(history.value_groups)
    fitting, best = 0, attempt(True, 0)
    step = 1
    while step < total:
        prompts = attempt(True, step)
        if not _fit(prompts, budget_tokens):
            break
        fitting, best, step = step, prompts, step * 2
    low, high = fitting, min(step, total)  # ``low`` values fit, ``high`` values do not
    while high - low > 1:
        middle = (low + high) // 2
        prompts = attempt(True, middle)
        if _fit(prompts, budget_tokens):
            low, best = middle, prompts
        else:
            high = middle
    return best


def _prompts(ctx: PromptContext) -> list[Prompt]:
    prompts = [project_context(ctx)]
    if ctx.first_conversation:
        prompts.append(first_contact(ctx))
    if ctx.entry.kind == "single":
        prompts.append(comparison(ctx))
        prompts.append(
            first_contact_single(ctx) if ctx.first_conversation else comparison_single(ctx)
        )
    else:
        report, instructions = PAIR_PROMPTS[ctx.entry.name]
        prompts.append(report(ctx))
        prompts.append(instructions(ctx))
    return prompts
