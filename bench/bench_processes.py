"""The process-tree lookups of ``ax3l.shared.processes`` that supervisors, the chaos tier and the
tests make (``descendants``: a tree's pids to freeze or kill; ``process_alive``: is a pid a live
process, zombies not), on a real tree (a shell with three sleeping children) beside
everything else running on the machine. Prints the median time of one call, and the same with
psutil (``Process.children(recursive=True)``, ``Process.status()``) when it is installed.

    .venv/bin/python bench/bench_processes.py           # 20 rounds of 200 calls
    .venv/bin/python bench/bench_processes.py --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
from collections.abc import Callable

import psutil

from ax3l.shared.processes import descendants, process_alive
from ax3l.shared.waiting import wait_until
from ax3l.testing.timing import per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    tree = subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600 & sleep 600 & wait"])
    try:
        wait_until(lambda: len(descendants(tree.pid)) == 3, 10, "the shell's three children")
        cases: list[tuple[str, Callable[[], object]]] = [
            ("descendants", lambda: descendants(tree.pid)),
            ("process_alive", lambda: process_alive(tree.pid)),
            ("  psutil alive", lambda: psutil.Process(tree.pid).status() != psutil.STATUS_ZOMBIE),
        ]
        for name, call in cases:
            figures = per_call(call, args.rounds, args.calls)
            print(
                f"{name}: median {statistics.median(figures) * 1e6:.1f} us a call, best"
                f" {min(figures) * 1e6:.1f} us ({args.rounds} rounds of {args.calls})"
            )
    finally:
        for pid in descendants(tree.pid):
            subprocess.run(["kill", str(pid)], check=False)
        tree.wait(10)


if __name__ == "__main__":
    main()
