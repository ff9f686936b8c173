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
        from ax3l.shared.run_model import expected_improvement

        choices = [c for c in _choices(dims) if key_of(c) not in excluded]
        if not choices:
            return super().choose(dims, history, excluded)
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
        best = max(range(len(choices)), key=lambda i: gains[i])
        chosen, estimate = choices[best], estimates[best]
        self._why = {
            "predicted_mean": round(estimate.mean, 4),
            "predicted_sd": round(estimate.sd, 4),
            "expected_improvement": round(gains[best], 4),
            "incumbent_mean": round(incumbent, 4),
            "choices": len(choices),
            "runs": len(model.records),
        }
        # The choice is excluded if it is refused, and the next best is asked.
        return chosen


def _choices(dims: Sequence[Dimension]) -> list[tuple[Value, ...]]:
    """Every legal combination of a finite entry; a grid on the declared scales otherwise."""
    points = GRID_POINTS if len(dims) == 1 else PAIR_GRID_POINTS
    per_dim = [dim.choices if dim.choices is not None else _grid(dim, points) for dim in dims]
    return list(itertools.product(*per_dim))


def _grid(dim: Dimension, points: int) -> tuple[Value, ...]:
    from ax3l.shared.run_model import Dimension as ModelDimension

    scaled = ModelDimension(dim.leaf.path, dim.low, dim.high, SCALES[dim.leaf.path])
    return tuple(dict.fromkeys(dim.clamp_round(v) for v in scaled.grid(points)))
