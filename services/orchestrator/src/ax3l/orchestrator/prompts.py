"""The conversation prompts, in this project's own words.

Every conversation opens with ProjectContext. The first conversation of an experiment (before
any proposal was accepted) adds FirstContact. Singles then get Comparison and FirstContactSingle
(first conversation) or ComparisonSingle (later); the pairs get their report
(ComparisonEpsilonPair / ComparisonRewardPair) and their instructions (FirstContactEpsilonPair /
FirstContactRewardPair). Each prompt is one message and is stored exactly as sent; the class
name is its ``source_name``. Correction prompts (InvalidValue, NoDupes) come from the broker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ax3l.orchestrator.comparable_history import ComparableHistory
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.reads import GoldenRecord
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
    golden: GoldenRecord
    history: ComparableHistory
    first_conversation: bool
    tool_name: str
    argument_names: tuple[str, ...]


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
    report = json.dumps(ctx.history.report(), indent=2)
    return Prompt(
        "Comparison",
        f"Assigned parameter: {ctx.entry.name} ({path}).\n"
        f"{_golden_line(ctx)} Its {path} is {_number(_golden_value(ctx, path))}.\n"
        f"Runs that differ from the golden configuration only in {path} (and possibly the"
        " seed), per tested value: `current_seed` lists the runs on the current seed"
        f" {ctx.golden.seed} (status and high score), `earlier_seeds` the high scores on"
        " earlier seeds, which are not directly comparable:\n"
        f"```json\n{report}\n```",
    )


def _single_request(ctx: PromptContext) -> str:
    argument = ctx.argument_names[0] if ctx.argument_names else "value"
    return (
        f'Call `{ctx.tool_name}` with {{"{argument}": <number>}}. Choose a value that has'
        f" no run on seed {ctx.golden.seed} yet: a value already run on this seed, or the"
        " golden value itself, is refused."
    )


def first_contact_single(ctx: PromptContext) -> Prompt:
    path = ctx.entry.paths[0]
    return Prompt(
        "FirstContactSingle",
        f"Your parameter is {path}.\n{_leaf_block(ctx, path)}\n"
        f"Pick the value of {path} you expect to score best, or the one whose result would"
        f" teach the most. {_single_request(ctx)}",
    )


def comparison_single(ctx: PromptContext) -> Prompt:
    path = ctx.entry.paths[0]
    return Prompt(
        "ComparisonSingle",
        f"Your parameter is {path}.\n{_leaf_block(ctx, path)}\n"
        f"Use the high-score history above to choose the next value of {path}: move towards"
        " what scored well, or test a region nobody has tried. "
        f"{_single_request(ctx)}",
    )


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
    report = ctx.history.report()
    for group in report:
        current = ", ".join(
            f"{r['high_score'] if r['high_score'] is not None else '-'} ({r['status']})"
            for r in group["current_seed"]
        )
        earlier = ", ".join(
            f"seed {r['seed']}: {r['high_score'] if r['high_score'] is not None else '-'}"
            for r in group["earlier_seeds"]
        )
        lines.append(
            f"| {_number(group[first])} | {_number(group[second])} | {current or 'none'}"
            f" | {earlier or 'none'} |"
        )
    if not report:
        lines.append("| - | - | none | none |")
    return "\n".join(lines)


def _pair_request(ctx: PromptContext) -> str:
    first, second = ctx.entry.paths
    names = ctx.argument_names if len(ctx.argument_names) == 2 else ("value_1", "value_2")
    return (
        f'Call `{ctx.tool_name}` with {{"{names[0]}": <{first}>, "{names[1]}": <{second}>}}.'
        " One of the two may keep its golden value if the other changes. A pair already run on"
        f" seed {ctx.golden.seed} is refused."
    )


def comparison_epsilon_pair(ctx: PromptContext) -> Prompt:
    return Prompt("ComparisonEpsilonPair", _pair_report(ctx, "Exploration settings tested"))


def first_contact_epsilon_pair(ctx: PromptContext) -> Prompt:
    first, second = ctx.entry.paths
    names = ctx.argument_names if len(ctx.argument_names) == 2 else ("value_1", "value_2")
    return Prompt(
        "FirstContactEpsilonPair",
        "Your pair sets the exploration schedule: the agent starts by acting at random with"
        " probability epsilon, and epsilon shrinks after every episode.\n"
        f"{_leaf_block(ctx, first, names[0])}\n{_leaf_block(ctx, second, names[1])}\n"
        "A high initial value with a slow decay explores for long; a fast decay exploits"
        f" early. Choose both values together. {_pair_request(ctx)}",
    )


def comparison_reward_pair(ctx: PromptContext) -> Prompt:
    return Prompt("ComparisonRewardPair", _pair_report(ctx, "Reward shapes tested"))


def first_contact_reward_pair(ctx: PromptContext) -> Prompt:
    first, second = ctx.entry.paths
    names = ctx.argument_names if len(ctx.argument_names) == 2 else ("value_1", "value_2")
    return Prompt(
        "FirstContactRewardPair",
        "Your pair shapes the reward for every move that neither eats nor dies: a bonus for"
        " moving closer to the food and a penalty for moving away from it.\n"
        f"{_leaf_block(ctx, first, names[0])}\n{_leaf_block(ctx, second, names[1])}\n"
        "Strong shaping speeds up learning to chase food but can teach the snake to trap"
        f" itself; weak shaping leaves it to the food reward. {_pair_request(ctx)}",
    )


PAIR_PROMPTS = {
    "epsilon_pair": (comparison_epsilon_pair, first_contact_epsilon_pair),
    "reward_pair": (comparison_reward_pair, first_contact_reward_pair),
}


def conversation_prompts(ctx: PromptContext) -> list[Prompt]:
    """The opening prompts of a conversation, in the order they are sent."""
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
