"""Timing for the benches under ``bench/``: seconds per call, one figure per round."""

from __future__ import annotations

import time
from collections.abc import Callable


def per_call(call: Callable[[], object], rounds: int, calls: int) -> list[float]:
    """``rounds`` figures, each the mean seconds of ``calls`` calls of ``call`` in a row."""
    figures = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        figures.append((time.perf_counter() - start) / calls)
    return figures
