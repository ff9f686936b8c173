"""What retrying costs besides its pauses: ``wait_for_database`` (every service's startup wait,
``ax3l.shared.db.availability``) and ``on_free_ports`` (``ax3l-compare``'s start of a service
again when its port was taken), both with their pauses at zero so that only the machinery is
timed. Prints the median time a retry takes over rounds, and the same with tenacity's
``AsyncRetrying``/``Retrying`` (the library the orchestrator's step retries use) for comparison.

    .venv/bin/python bench/bench_retries.py             # 20 rounds of 2,000 retries
    .venv/bin/python bench/bench_retries.py --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from ax3l.compare.processes import on_free_ports, port_taken
from ax3l.shared.db.availability import Outage, wait_for_database
from ax3l.shared.db.errors import DatabaseUnavailable
from ax3l.shared.processes import ProcessFailed


async def tenacity_wait(
    attempt: Callable[[], Awaitable[str]], outage: Outage, pause_max: float
) -> str:
    """``wait_for_database`` written with tenacity (same waits, the outage opened and closed)."""

    def note(state: RetryCallState) -> None:
        if state.outcome is not None and (error := state.outcome.exception()) is not None:
            outage.begin(error)

    retrying = AsyncRetrying(
        retry=retry_if_exception_type(DatabaseUnavailable),
        wait=wait_exponential(multiplier=0.2, max=pause_max),
        before_sleep=note,
        reraise=True,
    )
    result: str = await retrying(attempt)
    outage.end()
    return result


def tenacity_ports(start: Callable[[], int]) -> int:
    """``on_free_ports`` written with tenacity."""
    retrying = Retrying(
        retry=retry_if_exception(lambda exc: isinstance(exc, ProcessFailed) and port_taken(exc)),
        stop=stop_after_attempt(3),
        reraise=True,
    )
    return retrying(start)


def database_retries(failures: int, wait: Any = wait_for_database) -> float:
    """Seconds per failed attempt of a ``wait`` that succeeds after ``failures``."""
    left = failures

    async def attempt() -> str:
        nonlocal left
        if left:
            left -= 1
            raise DatabaseUnavailable("bench: the server is away")
        return "up"

    start = time.perf_counter()
    assert asyncio.run(wait(attempt, Outage(), pause_max=0.0)) == "up"
    return (time.perf_counter() - start) / failures


def port_retries(starts: int, retry: Any = on_free_ports) -> float:
    """Seconds per ``on_free_ports`` start whose first try finds its port taken."""
    tries = 0

    def start() -> int:
        nonlocal tries
        tries += 1
        if tries % 2:
            raise ProcessFailed("bench: [Errno 98] Address already in use")
        return tries

    begin = time.perf_counter()
    for _ in range(starts):
        retry(start)
    return (time.perf_counter() - begin) / starts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--retries", type=int, default=2000)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the outage's log lines are not what is measured
    database = [database_retries(args.retries) for _ in range(args.rounds)]
    ports = [port_retries(args.retries) for _ in range(args.rounds)]
    database_t = [database_retries(args.retries, tenacity_wait) for _ in range(args.rounds)]
    ports_t = [port_retries(args.retries, tenacity_ports) for _ in range(args.rounds)]
    for name, figures in (
        ("wait_for_database", database),
        ("  with tenacity", database_t),
        ("on_free_ports", ports),
        ("  with tenacity", ports_t),
    ):
        print(
            f"{name}: median {statistics.median(figures) * 1e6:.1f} us a retry, best "
            f"{min(figures) * 1e6:.1f} us ({args.rounds} rounds of {args.retries})"
        )


if __name__ == "__main__":
    main()
