"""The model of every run (``ax3l.shared.run_model``) as the loop keeps it: fitted again when a
run has completed since the last fit (``run_model.Refitter``: the hyperparameters optimised
again as the runs grow, conditioned on the new runs otherwise).

Nothing here is state to recover: a restart fits again from the runs. scikit-learn is imported
on the first fit, not at start: the spec's default loop never fits a model.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.db.snakelab_reads import SnakeLabRuns

if TYPE_CHECKING:
    from ax3l.shared.run_model import Refitter, RunModel, RunRecord, Space


class RunModels:
    """The current fit of the experiment's runs (those whose untuned settings are the golden's)."""

    def __init__(self, db: Database, schema: ConfigSchema):
        self.db = db
        self.schema = schema

    @cached_property
    def space(self) -> Space:
        from ax3l.shared.run_model import Space

        return Space(self.schema)

    @cached_property
    def refitter(self) -> Refitter:
        from ax3l.shared.run_model import Refitter

        return Refitter(self.space)

    async def records(self, reference: dict[str, Any]) -> list[RunRecord]:
        """Every completed run with a high score whose untuned settings equal ``reference``'s."""
        from ax3l.shared.run_model import fixed_columns, records_from_rows, tuned_columns

        rows = await SnakeLabRuns(self.db).matching(
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
        return self.refitter.fit(records)
