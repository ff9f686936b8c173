"""Stopping background tasks for sure.

``task.cancel(); await task`` can wait forever on Python 3.11: ``asyncio.wait_for`` returns the
result instead of raising when the cancellation lands just as its inner future completes
(fixed in 3.12), so a polling loop can swallow the one cancellation it gets and go on
polling. ``stop_task`` cancels again until the task has really ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

log = logging.getLogger(__name__)

# How long one cancellation gets before the next is sent.
RECANCEL_SECONDS = 0.1


async def stop_task(task: asyncio.Task[Any] | asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it has ended, whatever it does with a cancellation.

    Its outcome (result, exception or cancellation) is consumed, not raised; an exception it
    raised while being stopped is logged (one it ended with before is its owner's business).
    """
    was_done = task.done()
    attempts = 0
    while not task.done():
        task.cancel()
        attempts += 1
        await asyncio.wait({task}, timeout=RECANCEL_SECONDS)
    if attempts > 1:
        log.info("task %s needed %d cancellations to stop", _name(task), attempts)
    if task.cancelled():
        return
    with contextlib.suppress(asyncio.CancelledError):
        error = task.exception()
        if error is not None and not was_done:
            log.warning("task %s ended with %r while stopping", _name(task), error)


def _name(task: asyncio.Future[Any]) -> str:
    return task.get_name() if isinstance(task, asyncio.Task) else repr(task)
