"""No turn is asked again while a submission's outcome is unknown.

When SnakeLab does not answer the broker's submit in time, and stays silent for the broker's
settle wait too, the conversation fails with the submission intent still pending: SnakeLab may
yet create the run. Asking the turn again then could give the step two runs, one of them never
compared. So every step first settles pending intents (``ax3l.shared.db.intents.settle_pending``):
it waits until no broker can still send one, then for SnakeLab to answer, then adopts the run as
the turn's accepted proposal (the next step waits for it and compares it) or closes the intent
as known not to exist. While SnakeLab stays silent the step fails and is tried again after the
loop's backoff; nothing else happens meanwhile.
"""

from __future__ import annotations

import logging

from ax3l.orchestrator.services import Runs, StepFailed
from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.shared.db import intents
from ax3l.shared.snakelab_client import SnakeLabClient

logger = logging.getLogger(__name__)


async def settle_submissions(
    runs: Runs, snakelab: SnakeLabClient, status: LoopStatus, send_wait: float, settle_wait: float
) -> None:
    """Return once no submission intent is pending; ``StepFailed`` when one stays unknown.
    ``send_wait`` and ``settle_wait``: ``AX3L_SNAKELAB_TIMEOUT``, ``AX3L_SUBMIT_SETTLE_WAIT``."""
    db = runs.db
    pending = await intents.pending_intents(db)
    if not pending:
        return
    status.set_phase(Phase.SETTLING)
    wait_up_to = intents.SEND_WINDOW + send_wait + settle_wait
    before = {intent.intent_id for intent in pending}
    still = await intents.settle_pending(
        db, runs.schema, runs.log, snakelab, index=runs.index, wait_up_to=wait_up_to
    )
    for intent_id in sorted(before - {intent.intent_id for intent in still}):
        settled = await intents.get_intent(db, intent_id)
        if settled is not None:
            logger.info("submission intent %s settled: %s", intent_id, settled.state)
    if still:
        ids = ", ".join(str(intent.intent_id) for intent in still)
        raise StepFailed(
            f"the outcome of submission intent {ids} is still unknown: SnakeLab has not answered"
            f" for {wait_up_to:g} s; no turn is asked again until it is settled"
        )
