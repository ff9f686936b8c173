"""The ``model`` proposer: the entry's value the model of every run expects to improve most.

For the turn's entry it lists the open choices (a finite entry's untested values; for a
continuous value ``GRID_POINTS`` values evenly spaced on its declared scale, rounded as the
random proposer rounds, a pair's as a grid), predicts each one's score with the model of every
run (``ax3l.shared.run_model``: every other value as in the golden, averaged over seeds), and
submits the one with the highest expected improvement over the best predicted mean of any
evaluated configuration. Expected improvement weighs a high prediction against an uncertain one,
so the model tries a value it knows little about when nothing it knows promises more.

Below ``MIN_RUNS`` completed runs there is nothing to fit: the choice is random, as the random
proposer's (``AX3L_PROPOSER_SEED``). The choice and the figures behind it are in the
conversation's ``conversation_ended`` event (``model``).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ax3l.orchestrator.comparable_history import ComparableHistory
from ax3l.orchestrator.proposers.base import TurnContext
from ax3l.orchestrator.proposers.random_search import RandomProposer
from ax3l.orchestrator.proposers.search_space import Dimension, Key, Value, key_of
from ax3l.shared.registry import SCALES

logger = logging.getLogger(__name__)

# Values of a continuous tuned value the model scores (a pair: this many per side).
GRID_POINTS = 129
PAIR_GRID_POINTS = 33


class ModelProposer(RandomProposer):
    name = "model"

    _golden: tuple[float, ...] | None = None
    _model: Any = None  # the turn's RunModel, or None below MIN_RUNS
    _why: dict[str, Any] | None = None

    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        from ax3l.shared.run_model import TooFewRuns

        models = self.deps.models
        self._golden = models.space.values_of(ctx.golden.config)
        self._why = None
        try:
            self._model = await models.current(ctx.golden.config)
        except TooFewRuns as exc:
            self._model = None
            self._why = {"random": str(exc)}
        return await super().converse(ctx, conversation_id, started_event_id)

    def explanation(self) -> dict[str, Any]:
        return {} if self._why is None else {"model": self._why}

    def choose(
        self, dims: Sequence[Dimension], history: ComparableHistory, excluded: set[Key]
    ) -> tuple[Value, ...] | None:
        model, golden = self._model, self._golden
        if model is None or golden is None:
            return super().choose(dims, history, excluded)
        scored = score_choices(model, golden, dims, excluded)
        if not scored:
            return super().choose(dims, history, excluded)
        best = scored[0]
        self._why = {
            "predicted_mean": round(best.estimate.mean, 4),
            "predicted_sd": round(best.estimate.sd, 4),
            "expected_improvement": round(best.gain, 4),
            "incumbent_mean": round(best.incumbent, 4),
            "choices": len(scored),
            "runs": len(model.records),
        }
        # The choice is excluded if it is refused, and the next best is asked.
        return best.values


@dataclass(frozen=True)
class Scored:
    """An open choice as the model of every run sees it: its predicted mean score and sd, its
    expected improvement over ``incumbent`` (the best predicted mean of an evaluated one)."""

    values: tuple[Value, ...]
    estimate: Any  # run_model.Estimate
    gain: float
    incumbent: float


def score_choices(
    model: Any, golden: Sequence[float], dims: Sequence[Dimension], excluded: set[Key]
) -> list[Scored]:
    """The entry's open choices (finite: every legal one; continuous: the grid) not in
    ``excluded``, each predicted with every other value as in ``golden``, by expected
    improvement, best first (ties: in the choices' order)."""
    from ax3l.shared.run_model import expected_improvement

    choices = [c for c in _choices(dims) if key_of(c) not in excluded]
    if not choices:
        return []
    at = [model.space.index(dim.leaf.path) for dim in dims]
    points = []
    for choice in choices:
        point = list(golden)
        for index, value in zip(at, choice, strict=True):
            point[index] = float(value)
        points.append(point)
    estimates = model.predict(points)
    incumbent = model.recommend().estimate.mean
    gains = expected_improvement(estimates, incumbent)
    order = sorted(range(len(choices)), key=lambda i: -gains[i])
    return [Scored(choices[i], estimates[i], gains[i], incumbent) for i in order]


def _choices(dims: Sequence[Dimension]) -> list[tuple[Value, ...]]:
    """Every legal combination of a finite entry; a grid on the declared scales otherwise."""
    points = GRID_POINTS if len(dims) == 1 else PAIR_GRID_POINTS
    per_dim = [dim.choices if dim.choices is not None else _grid(dim, points) for dim in dims]
    return list(itertools.product(*per_dim))


def _grid(dim: Dimension, points: int) -> tuple[Value, ...]:
    from ax3l.shared.run_model import Dimension as ModelDimension

    scaled = ModelDimension(dim.leaf.path, dim.low, dim.high, SCALES[dim.leaf.path])
    return tuple(dict.fromkeys(dim.clamp_round(v) for v in scaled.grid(points)))
