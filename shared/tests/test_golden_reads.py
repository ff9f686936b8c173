"""The current golden as the loop reads it (strict) and the reports read it (lenient), on the
in-memory twin (``shared/tests/contract`` pins that MariaDB stores and returns the same row)."""

import pytest
from pydantic import ValidationError

from ax3l.shared.db.reads import current_golden, latest_golden_row, read_golden
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.testing.memory_store import MemoryEvents

GOLDEN = GoldenConfigCreated(
    run_id="r1", config={}, high_score=40, seed=1970, simulations=1, reason="initial"
)


async def test_current_golden_needs_every_required_field_and_takes_a_whole_float():
    """The current golden reads a hand-edited whole float as its int, as it always did, and
    refuses a content that lacks a required field, which the reports' lenient read of the same
    row leaves None."""
    store = MemoryEvents()
    # Hand-edited rows, which no model builds: the old form writes them as given.
    await store.log("golden_config_created", {**GOLDEN.stored(), "high_score": 40.0})
    found = await current_golden(store)
    assert found is not None and type(found[1].high_score) is int
    await store.log("golden_config_created", {"run_id": "r2", "high_score": 41})
    with pytest.raises(ValidationError, match="config"):
        await current_golden(store)
    row = await latest_golden_row(store)
    assert row is not None and row["score"] is None  # no experiment_highscores row
    lenient = read_golden(row["content"], strict=False)  # the reports' read of it
    assert (lenient.run_id, lenient.high_score, lenient.config) == ("r2", 41, None)
