"""Exhaustion skips: a finite entry whose every legal choice already ran is not asked for.

A choice has run when a stored run (any status) has it with the current seed and every other
setting equal to the golden configuration. Earlier seeds and other settings do not count.
Continuous entries are never exhausted.
"""

from __future__ import annotations

import logging

from ax3l.orchestrator.turns import Turn
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import GoldenConfigCreated, ParameterSpaceExhausted
from ax3l.shared.registry import domain

logger = logging.getLogger(__name__)


async def skip_if_exhausted(
    index: ConfigIndex,
    log: EventLog,
    process_id: str,
    turn: Turn,
    golden: GoldenConfigCreated,
    checkpoint_event_id: int,
) -> bool:
    """Log ``parameter_space_exhausted`` and return True when the turn's domain is used up."""
    choices = domain(index.schema, turn.entry)
    if choices is None:
        return False
    if not await index.is_exhausted(turn.entry, golden.config):
        return False
    await log.log(
        ParameterSpaceExhausted(
            parameter=turn.parameter,
            index=turn.index,
            seed=golden.seed,
            golden_run_id=golden.run_id,
            choices=len(choices),
        ),
        process_id=process_id,
        parent_event_id=checkpoint_event_id,
        parameter=turn.parameter,
    )
    logger.info(
        "%s: all %d choices already ran on seed %d; skipped",
        turn.parameter,
        len(choices),
        golden.seed,
    )
    return True
