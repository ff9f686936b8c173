"""Seed rotation: after enough stagnant cycles, rerun the golden config on seed + 1.

The rotation is stored first (``seed_rotation_started`` with the new config, then
``golden_config_seed_incremented``); its run is looked up by configuration before it is
submitted, so no restart submits it twice. Its score becomes the new golden baseline even when
it is lower. A baseline run without a high score runs again within the bounds of
``ax3l.orchestrator.baselines``. Under ``AX3L_PROMOTION=confirm`` the baseline is scored over
the new seed's confirmation seeds too (``confirmation.baseline_fields``), and those runs are
submitted as soon as the baseline's run is recorded, so that several SnakeLab hosts train them
side by side. Tuning resumes at the same round-robin position.
"""

from __future__ import annotations

import logging
from typing import Any, TypeAlias

from ax3l.orchestrator.baselines import BaselineKind, scored_baseline
from ax3l.orchestrator.golden import create_golden
from ax3l.orchestrator.racing import (
    Promotion,
    baseline_fields,
    submit_baseline_confirmation,
)
from ax3l.orchestrator.services import Runs
from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.orchestrator.waiting import ended_unscored
from ax3l.shared.crash_points import crash_point
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_reads import StoredEvent, latest
from ax3l.shared.event_models import (
    GoldenConfigCreated,
    GoldenConfigSeedIncremented,
    SeedRotationStarted,
    SimulationSubmitted,
)

logger = logging.getLogger(__name__)

SOURCE = "SeedRotation"
ROTATION = BaselineKind(Phase.ROTATING, "seed_rotation", SOURCE, crash_at="rotation")


Rotation: TypeAlias = StoredEvent[SeedRotationStarted]


async def pending_rotation(db: Database, golden_event_id: int) -> Rotation | None:
    """A rotation started after the current golden configuration (so not finished)."""
    return await latest(db, SeedRotationStarted, after=golden_event_id)


async def _baseline_record(
    db: Database, rotation: Rotation
) -> StoredEvent[SimulationSubmitted] | None:
    """The rotation's recorded baseline submission, unless that run failed (it runs again)."""
    # Only the baseline's own records: under confirm its confirmation runs are recorded later,
    # by another source, after the baseline run's end.
    record = await latest(db, SimulationSubmitted, parent=rotation.event_id, source_name=SOURCE)
    if record is None:
        return None
    if await ended_unscored(db, record.process_id):
        return None
    return record


async def pending_rotation_run(runs: Runs, rotation: Rotation) -> str | None:
    """The run ``rotation`` will wait for: its recorded baseline, else the run it would reuse."""
    record = await _baseline_record(runs.db, rotation)
    if record is not None:
        return str(record.process_id)
    config = rotation.model.config
    assert config is not None, f"seed_rotation_started {rotation.event_id} has no config"
    return await runs.submitter.usable_run(config)


async def start_rotation(
    runs: Runs,
    status: LoopStatus,
    process_id: str,
    golden_event_id: int,
    golden: GoldenConfigCreated,
    stagnant: int,
) -> StoredEvent[Any]:
    """Store the decision to rotate, with the exact config the baseline run will use."""
    schema = runs.schema
    new_seed = golden.seed + 1
    config = schema.validate(schema.with_values(golden.config, {"seed": new_seed}))
    status.set_phase(Phase.ROTATING)
    await runs.log.log(
        SeedRotationStarted(
            config=config,
            seed=new_seed,
            previous_seed=golden.seed,
            golden_run_id=golden.run_id,
            golden_event_id=golden_event_id,
            golden_high_score=golden.high_score,
            stagnant_cycles=stagnant,
        ),
        process_id=process_id,
        parent_event_id=golden_event_id,
        source_name=SOURCE,
    )
    logger.info("%d stagnant cycles: rotating the seed %d -> %d", stagnant, golden.seed, new_seed)
    crash_point("rotation_started")
    rotation = await pending_rotation(runs.db, golden_event_id)
    assert rotation is not None
    return rotation


async def finish_rotation(
    runs: Runs, status: LoopStatus, promotion: Promotion, process_id: str, rotation: Rotation
) -> None:
    """Increment, submit (once), wait, and record the new baseline."""
    db, log = runs.db, runs.log
    status.set_phase(Phase.ROTATING)
    started = rotation.model
    config = started.config
    assert config is not None, f"seed_rotation_started {rotation.event_id} has no config"
    assert started.seed is not None, f"seed_rotation_started {rotation.event_id} has no seed"
    new_seed = started.seed
    previous_seed = started.previous_seed
    if await latest(db, GoldenConfigSeedIncremented, parent=rotation.event_id) is None:
        await log.log(
            GoldenConfigSeedIncremented(
                seed=new_seed, previous_seed=previous_seed, golden_run_id=started.golden_run_id
            ),
            process_id=process_id,
            parent_event_id=rotation.event_id,
            source_name=SOURCE,
        )
    record = await _baseline_record(db, rotation)
    what = f"seed {new_seed} baseline"
    run_id, outcome = await scored_baseline(
        runs,
        status,
        ROTATION,
        config,
        record,
        what=what,
        parent_event_id=rotation.event_id,
        alongside=lambda: submit_baseline_confirmation(
            runs, promotion, config, new_seed, rotation.event_id
        ),
    )
    assert outcome.high_score is not None
    previous = started.golden_high_score
    run_config = outcome.config or config
    confirmed = await baseline_fields(
        runs, promotion, run_id, run_config, outcome.high_score, new_seed, outcome.event_id
    )
    await create_golden(
        db,
        log,
        run_id=run_id,
        config=run_config,
        high_score=outcome.high_score,
        seed=new_seed,
        reason=(
            f"Fresh baseline for seed {new_seed}: the golden configuration scored"
            f" {outcome.high_score} (it scored {previous} on seed {previous_seed})."
        ),
        kind="seed_rotation",
        parent_event_id=rotation.event_id,
        extra={
            "previous_seed": previous_seed,
            "previous_run_id": started.golden_run_id,
            "previous_high_score": previous,
            **confirmed,
        },
    )
    status.set_phase(
        Phase.CHOOSING,
        run_id=None,
        seed=new_seed,
        golden_run_id=run_id,
        golden_high_score=outcome.high_score,
    )
    logger.info("seed %d baseline: run %s scored %s", new_seed, run_id, outcome.high_score)
