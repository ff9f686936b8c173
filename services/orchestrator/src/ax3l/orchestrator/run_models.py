"""The model of every run (``ax3l.shared.run_model``) as the loop keeps it: refitted when a run
has completed since the last fit, starting from the last fit's hyperparameters.

A fit from the last hyperparameters converges in a few optimizer steps; every ``COLD_EVERY``
runs a fit from the initial kernel is made too and the better of the two (by log marginal
likelihood) kept, so that hyperparameters found on the first few runs do not hold for ever.
Nothing here is state to recover: a restart fits again from the runs. scikit-learn is imported
on the first fit, not at start: the spec's default loop never fits a model.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.db.snakelab_reads import runs_matching

if TYPE_CHECKING:
    from ax3l.shared.run_model import RunModel, RunRecord, Space

COLD_EVERY = 10


class RunModels:
    """The current fit of the experiment's runs (those whose untuned settings are the golden's)."""

    def __init__(self, db: Database, schema: ConfigSchema):
        self.db = db
        self.schema = schema
        self._model: RunModel | None = None
        self._key: tuple[int, str | None] | None = None
        self._cold_at = 0

    @cached_property
    def space(self) -> Space:
        from ax3l.shared.run_model import Space

        return Space(self.schema)

    async def records(self, reference: dict[str, Any]) -> list[RunRecord]:
        """Every completed run with a high score whose untuned settings equal ``reference``'s."""
        from ax3l.shared.run_model import fixed_columns, records_from_rows, tuned_columns

        rows = await runs_matching(
            self.db,
            fixed_columns(self.schema, reference),
            [*tuned_columns(), "seed"],
            doing="reading the runs the model is fitted to",
        )
        return records_from_rows(rows)

    async def current(self, reference: dict[str, Any]) -> RunModel:
        """The model of the runs as they are now (``TooFewRuns`` below ``MIN_RUNS``)."""
        return self.fit(await self.records(reference))

    def fit(self, records: list[RunRecord]) -> RunModel:
        """The fit of ``records``: the cached one when no run was added since."""
        from ax3l.shared.run_model import RunModel

        key = (len(records), records[-1].run_id if records else None)
        if self._model is not None and key == self._key:
            return self._model
        previous = self._model.fitted if self._model is not None else None
        model = RunModel(self.space, records, start=previous)
        if previous is not None and len(records) >= self._cold_at + COLD_EVERY:
            cold = RunModel(self.space, records)
            if cold.log_marginal_likelihood > model.log_marginal_likelihood:
                model = cold
            self._cold_at = len(records)
        self._model, self._key = model, key
        return model
