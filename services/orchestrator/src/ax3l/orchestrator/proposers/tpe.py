"""The ``tpe`` proposer: Optuna's TPE sampler, fitted on the comparable history of the entry.

The trials are the runs the prompts would show: the entry's values with every other setting
equal to the golden configuration, scored on the current seed (scores of other seeds are not
comparable). With few trials TPE samples at random, as its startup phase intends. A suggestion
that already ran (or is the golden value) is skipped; after a few such skips a random untested
choice is used, so a finite domain always makes progress.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from ax3l.orchestrator.comparable_history import ComparableHistory
from ax3l.orchestrator.proposers.base import ProposerDeps
from ax3l.orchestrator.proposers.random_search import RandomProposer
from ax3l.orchestrator.proposers.search_space import (
    Dimension,
    Key,
    Value,
    key_of,
    random_untested,
)

STARTUP_TRIALS = 5
ASKS = 25

logger = logging.getLogger(__name__)


def _distribution(dim: Dimension) -> BaseDistribution:
    if dim.choices is not None:
        if dim.leaf.type == "integer" and len(dim.choices) > 1:
            steps = {b - a for a, b in zip(dim.choices, dim.choices[1:], strict=False)}
            if len(steps) == 1:
                step = int(steps.pop())
                return IntDistribution(int(dim.low), int(dim.high), step=step)
        return CategoricalDistribution(list(dim.choices))
    log = dim.low > 0 and dim.high / dim.low >= 10
    return FloatDistribution(dim.low, dim.high, log=log)


class TpeProposer(RandomProposer):
    name = "tpe"

    def __init__(self, deps: ProposerDeps, max_corrections: int, seed: int | None = None):
        super().__init__(deps, max_corrections, seed)
        optuna.logging.set_verbosity(optuna.logging.WARNING)

    def choose(
        self, dims: Sequence[Dimension], history: ComparableHistory, excluded: set[Key]
    ) -> tuple[Value, ...] | None:
        names = [dim.leaf.path for dim in dims]
        distributions = {name: _distribution(dim) for name, dim in zip(names, dims, strict=True)}
        with warnings.catch_warnings():
            # Optuna flags multivariate TPE and friends as experimental; that is no error here.
            warnings.simplefilter("ignore")
            sampler = optuna.samplers.TPESampler(
                seed=self.rng.randrange(2**31),
                n_startup_trials=STARTUP_TRIALS,
                multivariate=len(dims) > 1,
            )
            study = optuna.create_study(direction="maximize", sampler=sampler)
            for run in history.current_seed():
                if run.status != "completed" or run.high_score is None:
                    continue
                params: dict[str, Any] = dict(zip(names, run.values, strict=True))
                try:
                    study.add_trial(
                        optuna.trial.create_trial(
                            params=params, distributions=distributions, value=run.high_score
                        )
                    )
                except ValueError:
                    continue  # a value outside today's schema: it cannot inform this space
            for _ in range(ASKS):
                trial = study.ask(distributions)
                values = tuple(
                    dim.clamp_round(_significant(trial.params[name]))
                    for name, dim in zip(names, dims, strict=True)
                )
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                if key_of(values) not in excluded:
                    return values
        logger.info("TPE kept suggesting tested values; choosing an untested one at random")
        return random_untested(dims, excluded, self.rng)


def _significant(value: Any, digits: int = 4) -> float:
    """Four significant digits: what a person (or an LLM) would write."""
    return float(f"{float(value):.{digits}g}")
