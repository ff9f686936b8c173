"""Initial seeding: the schema's default configuration becomes the first golden configuration.

With no golden configuration yet, the default config is submitted once (or an existing run of
it is reused, found by its configuration) and the submission recorded; the run is waited on and
accepted as the first golden once its score exists. A restart resumes the recorded submission.
A seeding run that ended without a high score (``completed`` without one included) is submitted
again after a backoff, within the bounds of ``ax3l.orchestrator.baselines``. Under
``AX3L_PROMOTION=confirm`` the defaults also run on the confirmation seeds before they become
the golden (``confirmation.baseline_fields``), so the golden's mean is known.

Seeding starts only on an empty SnakeLab (the spec's first start): with runs there and no
experiment of Ax3l's, start-up refuses instead (``ax3l.orchestrator.startup``), and
``ax3l-db adopt`` can take those runs as the experiment's past.
"""

from __future__ import annotations

import logging
from typing import Any

from ax3l.orchestrator.baselines import BaselineKind, scored_baseline
from ax3l.orchestrator.golden import create_golden
from ax3l.orchestrator.racing import Promotion, baseline_fields
from ax3l.orchestrator.services import Runs
from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.orchestrator.waiting import ended_unscored
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import StoredEvent, latest
from ax3l.shared.event_models import SimulationSubmitted

logger = logging.getLogger(__name__)

SOURCE = "InitialSeeding"
SEEDING = BaselineKind(Phase.SEEDING, "seeding", SOURCE, crash_at="seeding")


async def _usable_record(db: Database) -> StoredEvent[SimulationSubmitted] | None:
    record = await latest(db, SimulationSubmitted, source_name=SOURCE)
    if record is None:
        return None
    if await ended_unscored(db, record.process_id):
        return None  # that run has no score: seeding starts over with a new submission
    return record


def default_config(schema: ConfigSchema) -> dict[str, Any]:
    """The configuration initial seeding runs: the schema's defaults."""
    return schema.validate(schema.default_config())


async def pending_seeding_run(runs: Runs) -> str | None:
    """The run seeding will wait for: its recorded submission, else the run it would reuse."""
    record = await _usable_record(runs.db)
    if record is not None:
        return str(record.process_id)
    return await runs.submitter.usable_run(default_config(runs.schema))


async def seed(runs: Runs, status: LoopStatus, promotion: Promotion) -> None:
    """Establish the first golden configuration (call only when there is none)."""
    status.set_phase(Phase.SEEDING)
    record = await _usable_record(runs.db)
    config = default_config(runs.schema)
    run_id, outcome = await scored_baseline(
        runs, status, SEEDING, config, record, what="seeding", parent_event_id=None
    )
    assert outcome.high_score is not None
    run_config = outcome.config or config
    seed_value = int(run_config["seed"])
    confirmed = await baseline_fields(
        runs, promotion, run_id, run_config, outcome.high_score, seed_value, outcome.event_id
    )
    await create_golden(
        runs.db,
        runs.log,
        run_id=run_id,
        config=run_config,
        high_score=outcome.high_score,
        seed=seed_value,
        reason=(
            f"Initial golden configuration: the schema's defaults scored {outcome.high_score}"
            f" on seed {seed_value}."
        ),
        kind="seeding",
        parent_event_id=outcome.event_id,
        extra=confirmed,
    )
    status.set_phase(
        Phase.CHOOSING,
        run_id=None,
        golden_run_id=run_id,
        golden_high_score=outcome.high_score,
        seed=seed_value,
    )
    logger.info("initial golden configuration: run %s, high score %s", run_id, outcome.high_score)
