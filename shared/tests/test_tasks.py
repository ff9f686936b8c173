"""stop_task ends tasks that swallow cancellations, as Python 3.11's wait_for can."""

from __future__ import annotations

import asyncio

from ax3l.shared.tasks import stop_task


async def test_a_task_that_swallows_cancellations_is_still_stopped() -> None:
    """Cancelled again until it ends: a loop that shrugs off two cancellations stops."""
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed == 3:
                    raise

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(stop_task(task), 5)
    assert task.cancelled() and swallowed == 3


async def test_finished_and_failed_tasks_are_consumed_quietly() -> None:
    """A task that already ended (with a result or an error) is left as it is, nothing raised."""

    async def fail() -> None:
        raise ValueError("boom")

    async def succeed() -> int:
        return 7

    failed, succeeded = asyncio.create_task(fail()), asyncio.create_task(succeed())
    await asyncio.wait({failed, succeeded})
    await stop_task(failed)
    await stop_task(succeeded)
    assert succeeded.result() == 7 and isinstance(failed.exception(), ValueError)
