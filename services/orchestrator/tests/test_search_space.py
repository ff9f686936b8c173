"""The built-in proposers' choices: legal, untested, and quiet under warnings-as-errors."""

from __future__ import annotations

import random

from ax3l.orchestrator.comparable_history import ComparableHistory, HistoryRun
from ax3l.orchestrator.proposers.search_space import dimensions, key_of, random_untested
from ax3l.shared.canonical import canonical_number
from ax3l.shared.config_schema import load_schema
from ax3l.shared.registry import BY_NAME, domain

SCHEMA = load_schema()


def test_random_choices_of_a_finite_domain_are_untested_until_none_are_left() -> None:
    """Every untested reward pair is drawn exactly once, then there is nothing left."""
    entry = BY_NAME["reward_pair"]
    dims = dimensions(SCHEMA, entry)
    excluded: set = set()
    rng = random.Random(5)
    for _ in range(49):
        values = random_untested(dims, excluded, rng)
        assert values is not None and key_of(values) not in excluded
        assert all(isinstance(v, int) for v in values)
        excluded.add(key_of(values))
    assert excluded == set(domain(SCHEMA, entry) or [])
    assert random_untested(dims, excluded, rng) is None


def test_random_continuous_values_stay_inside_the_schema_range() -> None:
    """Continuous values are rounded to a readable precision and cover the spec's whole range
    (0.0005-0.005, R9) and no more: the draws reach within a tenth of each end."""
    dims = dimensions(SCHEMA, BY_NAME["learning_rate"])
    rng = random.Random(1)
    drawn = []
    for _ in range(200):
        (value,) = random_untested(dims, set(), rng) or (None,)
        assert isinstance(value, float)
        assert 0.0005 <= value <= 0.005
        assert canonical_number(value) == canonical_number(round(value, dims[0].decimals))
        drawn.append(value)
    tenth = (0.005 - 0.0005) / 10
    assert min(drawn) < 0.0005 + tenth and max(drawn) > 0.005 - tenth


def _tpe_choose(name: str, runs: tuple[HistoryRun, ...], excluded: set, seed: int = 3) -> tuple:
    from ax3l.orchestrator.proposers.tpe import TpeProposer

    entry = BY_NAME[name]
    proposer = TpeProposer.__new__(TpeProposer)
    proposer.rng = random.Random(seed)
    history = ComparableHistory(entry, 1970, (224,), runs)
    values = proposer.choose(dimensions(SCHEMA, entry), history, excluded)
    assert values is not None
    return values


def test_tpe_suggests_untested_legal_values_from_the_history() -> None:
    """TPE fitted on current-seed results never proposes a value that already ran."""
    runs = tuple(
        HistoryRun(f"r{h}", "completed", 30 + (h // 16) % 7, 1970, (h,)) for h in range(64, 385, 32)
    )
    excluded = {run.key for run in runs}
    legal = set(domain(SCHEMA, BY_NAME["hidden_size"]) or [])
    for _ in range(5):
        values = _tpe_choose("hidden_size", runs, excluded)
        assert key_of(values) in legal and key_of(values) not in excluded
        excluded.add(key_of(values))


def test_tpe_on_a_continuous_pair_is_legal() -> None:
    """The multivariate pair sampler runs without warnings, and its draws on 40 seeds stay in
    the spec's ranges (epsilon initial 0.85-0.999, decay 0.9-0.999: R11, R12) and spread over
    most of each: a range widened or narrowed in the schema shows."""
    runs = (
        HistoryRun("a", "completed", 40, 1970, (0.96, 0.97)),
        HistoryRun("b", "failed", None, 1970, (0.9, 0.95)),
    )
    draws = [_tpe_choose("epsilon_pair", runs, {run.key for run in runs}, s) for s in range(40)]
    for (low, high), values in zip(
        ((0.85, 0.999), (0.9, 0.999)), zip(*draws, strict=True), strict=True
    ):
        assert all(low <= value <= high for value in values), values
        quarter = (high - low) / 4
        assert min(values) < low + quarter and max(values) > high - quarter, values
