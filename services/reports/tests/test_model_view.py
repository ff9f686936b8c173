"""The model view over stored goldens it cannot read whole: no estimate for the golden, the
recommendation as ever (no browser and no database: the view is fed the runs table's frame).

Kept apart from ``test_model_pages``, whose sync Playwright test leaves an event loop running in
the thread, where an async test after it cannot run its own."""

from __future__ import annotations

import polars as pl
import pytest
from reports_history import read_runs

from ax3l.reports.queries.run_model import RunModelCache
from ax3l.shared.config_schema import cached_schema


@pytest.mark.parametrize(
    "damage",
    [
        lambda config: config.pop("model"),
        lambda config: config["training"].update(learning_rate="fast"),
        lambda config: config.update(training=None),
    ],
    ids=["no model section", "a value that is no number", "a section that is null"],
)
async def test_a_golden_short_of_a_tuned_value_has_no_estimate_and_the_view_still_answers(
    damage,
):
    """A golden event's configuration is stored text (an old writer's, a hand-made event): one
    without every tuned value as a number gets no estimate, and the recommendation is still
    made (the dashboard answered 500 with a ``KeyError``); the intact one gets its run's."""
    runs = read_runs(60)
    frame = pl.DataFrame(
        [
            {"run_id": r.run_id, "status": r.status, "high_score": r.high_score, **r.flat}
            for r in runs
        ]
    )
    schema = cached_schema(None)
    cache = RunModelCache()
    intact = await cache.view(frame, schema, schema.unflatten(runs[0].flat), 1.0)
    assert intact.golden is not None and intact.golden.run_id == runs[0].run_id
    damaged = schema.unflatten(runs[0].flat)
    damage(damaged)
    view = await cache.view(frame, schema, damaged, 1.0)
    assert view.problem is None and view.golden is None
    assert view.recommendation == intact.recommendation
