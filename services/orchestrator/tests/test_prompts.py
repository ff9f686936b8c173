"""Which prompts a conversation opens with, and what they tell the model."""

from __future__ import annotations

import copy
import json
import re

import pytest

from ax3l.orchestrator.comparable_history import ComparableHistory, HistoryRun
from ax3l.orchestrator.prompts import PromptContext, conversation_prompts
from ax3l.shared.config_schema import ConfigSchema, load_schema
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.shared.registry import BY_NAME, SINGLES

SCHEMA = load_schema()
DEFAULTS = SCHEMA.default_config()
GOLDEN = GoldenConfigCreated(
    run_id="golden-run", config=DEFAULTS, high_score=45, seed=1970, simulations=3, reason="x"
)


def context(name: str, first: bool, runs: tuple[HistoryRun, ...] = ()) -> PromptContext:
    entry = BY_NAME[name]
    golden_values = tuple(SCHEMA.get(DEFAULTS, path) for path in entry.paths)
    return PromptContext.of(
        SCHEMA, GOLDEN, ComparableHistory(entry, 1970, golden_values, runs), first
    )


@pytest.mark.parametrize(
    ("name", "first", "sources"),
    [
        (
            "hidden_size",
            True,
            ["ProjectContext", "FirstContact", "Comparison", "FirstContactSingle"],
        ),
        ("gamma", False, ["ProjectContext", "Comparison", "ComparisonSingle"]),
        (
            "epsilon_pair",
            False,
            ["ProjectContext", "ComparisonEpsilonPair", "FirstContactEpsilonPair"],
        ),
        (
            "reward_pair",
            False,
            ["ProjectContext", "ComparisonRewardPair", "FirstContactRewardPair"],
        ),
        (
            "reward_pair",
            True,
            ["ProjectContext", "FirstContact", "ComparisonRewardPair", "FirstContactRewardPair"],
        ),
    ],
)
def test_each_conversation_opens_with_the_prompts_the_spec_lists(
    name: str, first: bool, sources: list[str]
) -> None:
    """ProjectContext first; FirstContact only in the first conversation; the entry's pair."""
    prompts = conversation_prompts(context(name, first))
    assert [p.source_name for p in prompts] == sources
    assert prompts[0].role == "system"
    assert "Patrick Loeber" in prompts[0].text and "Train an AI to Play Snake" in prompts[0].text


def test_single_prompts_show_the_schema_description_rules_golden_and_history() -> None:
    """The single's schema description and rules, golden value and score, and JSON history."""
    runs = (
        HistoryRun("r1", "completed", 45, 1970, (224,)),
        HistoryRun("r2", "failed", None, 1970, (240,)),
        HistoryRun("r3", "completed", 38, 1969, (240,)),
    )
    prompts = conversation_prompts(context("hidden_size", False, runs))
    comparison, request = prompts[1].text, prompts[2].text
    leaf = SCHEMA.by_path["model.hidden_size"]
    assert leaf.description in request and leaf.rules_text() in request
    assert "submit_single_value" in request and '{"value": <number>}' in request
    assert "high score 45" in comparison and "model.hidden_size is 224" in comparison
    report = json.loads(re.search(r"```json\n(.*)\n```", comparison, re.S).group(1))  # type: ignore[union-attr]
    assert report == [
        {
            "value": 224,
            "current_seed": [{"run_id": "r1", "status": "completed", "high_score": 45}],
            "earlier_seeds": [],
        },
        {
            "value": 240,
            "current_seed": [{"run_id": "r2", "status": "failed", "high_score": None}],
            "earlier_seeds": [{"seed": 1969, "high_score": 38}],
        },
    ]


@pytest.mark.parametrize("first", [True, False], ids=["FirstContactSingle", "ComparisonSingle"])
@pytest.mark.parametrize("name", SINGLES)
def test_single_instructions_give_the_schema_description_before_asking_for_a_value(
    name: str, first: bool
) -> None:
    """FirstContactSingle and ComparisonSingle carry the assigned leaf's description as the
    schema file words it, ahead of the request for a value."""
    entry = BY_NAME[name]
    (path,) = entry.paths
    document = copy.deepcopy(SCHEMA.document)
    node = document
    for part in path.split("."):
        node = node["properties"][part]
    marker = f"Described only in this schema: {path} (marker 7f3a)."
    node["description"] = marker
    schema = ConfigSchema(document)
    history = ComparableHistory(entry, 1970, (schema.get(DEFAULTS, path),), ())
    prompts = conversation_prompts(PromptContext.of(schema, GOLDEN, history, first))

    instructions = prompts[-1]
    assert instructions.source_name == ("FirstContactSingle" if first else "ComparisonSingle")
    assert marker in instructions.text
    request = instructions.text.index("Call `submit_single_value`")
    assert instructions.text.index(marker) < request


def test_pair_prompts_tabulate_tested_pairs_and_map_the_tool_arguments() -> None:
    """A pair's report lists each tested pair; its instructions map value_1 and value_2."""
    runs = (
        HistoryRun("r1", "completed", 45, 1970, (2, -2)),
        HistoryRun("r2", "completed", 41, 1969, (3, -1)),
    )
    report, instructions = conversation_prompts(context("reward_pair", False, runs))[1:]
    assert "| 2 | -2 | 45 (completed) | none |" in report.text
    assert "| 3 | -1 | none | seed 1969: 41 |" in report.text
    assert "game.rewards.closer_to_food (tool argument `value_1`)" in instructions.text
    assert "game.rewards.further_from_food (tool argument `value_2`)" in instructions.text
    assert "submit_pair_values" in instructions.text
