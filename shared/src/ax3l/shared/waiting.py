"""Waiting on a condition with a deadline: the one way the tests, the test support,
``scripts/stack.py`` and ``ax3l-compare`` wait (never a fixed sleep, never a loop of their own).

``wait_until`` polls a plain function, ``wait_until_async`` a function or coroutine function
from inside an event loop. Both return the condition's first truthy result and raise
``WaitTimeout`` at the deadline; ``give_up`` (called between polls) ends the wait at once with
its message, after one last look at the condition, for a process that died meanwhile.
``WaitTimeout`` is an ``AssertionError``, so that in a test it reads as a failed check.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any


class WaitTimeout(AssertionError):
    """A condition did not come true before the deadline (or ``give_up`` said it never will)."""


class _Ending:
    """When a wait is over (the deadline, or ``give_up``'s message) and how it ends."""

    def __init__(self, timeout: float, what: str, give_up: Callable[[], str | None] | None) -> None:
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.what = what
        self.give_up = give_up
        self.reason = ""

    def reached(self) -> bool:
        self.reason = (self.give_up() if self.give_up is not None else None) or ""
        if not self.reason and time.monotonic() > self.deadline:
            self.reason = f"timed out after {self.timeout}s waiting for {self.what}"
        return bool(self.reason)

    def checked(self, result: Any) -> Any:
        """``result`` when it is truthy (the last look succeeded), else the failure."""
        if result:
            return result
        raise WaitTimeout(self.reason)


def wait_until(
    condition: Callable[[], Any],
    timeout: float = 10.0,
    what: str = "",
    *,
    interval: float = 0.02,
    give_up: Callable[[], str | None] | None = None,
) -> Any:
    """Poll ``condition`` until it returns something truthy; raise ``WaitTimeout`` at the
    deadline, or as soon as ``give_up`` returns a message."""
    ending = _Ending(timeout, what or str(condition), give_up)
    while True:
        result = condition()
        if result or ending.reached():
            # One last look: it may have come true just before the end.
            return ending.checked(result or condition())
        time.sleep(interval)


async def wait_until_async(
    condition: Callable[[], Any] | Callable[[], Awaitable[Any]],
    timeout: float = 10.0,  # noqa: ASYNC109 - the same deadline as wait_until's, polled
    what: str = "",
    *,
    interval: float = 0.02,
    give_up: Callable[[], str | None] | None = None,
) -> Any:
    """``wait_until`` inside an event loop: ``condition`` may be a coroutine function, and
    the loop keeps running between polls."""

    async def check() -> Any:
        result = condition()
        return await result if inspect.isawaitable(result) else result

    ending = _Ending(timeout, what or str(condition), give_up)
    while True:
        result = await check()
        if result or ending.reached():
            return ending.checked(result or await check())
        await asyncio.sleep(interval)
