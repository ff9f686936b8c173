"""Where a comparison's repeats run: one ``Executor`` interface, two implementations.

``LocalExecutor`` runs ``--parallel`` repeats side by side on this machine (threads, each
repeat's services forked from one preloader); ``ray_executor.RayExecutor`` (``--ray
ADDRESS``) makes each repeat a Ray task on a node of a cluster. Both run every repeat through
``execute_repeat``, which is ``repeat.run_repeat`` with the comparison's settings: there is one
implementation of a repeat, wherever it runs.

``ax3l-compare`` hands the executor the plans and a ``RepeatJob`` (what every repeat of the
comparison shares), reads each result as it comes (``completed``), stores it once (it alone
writes results: a repeat that ran twice, a Ray task re-run after its node was lost, still
returns one result), and on Ctrl-C or SIGTERM calls ``cancel``: the running repeats stop their
services and drop their databases. ``close`` waits for them. Each repeat's database pair is
named after the comparison (``throwaway.pair_prefix``), so an attempt drops the pairs of its
earlier attempts, and ``ax3l-compare`` drops whatever pair of the comparison is left at its end.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ax3l.compare import processes, version
from ax3l.compare.preload import Preloader
from ax3l.compare.processes import Launcher
from ax3l.compare.repeat import Placement, RepeatPlan, RepeatResult, run_repeat
from ax3l.compare.settings import load_settings
from ax3l.compare.throwaway import pair_prefix

# The settings a repeat's services read from ``ax3l-compare``'s environment; the rest of a
# process's environment (PATH, HOME...) is the machine's own (``node_env``).
SETTING_PREFIXES = ("AX3L_", "DB_", "SNAKELAB_")


@dataclass(frozen=True)
class RepeatJob:
    """What every repeat of one comparison runs with."""

    env: dict[str, str]  # settings (db.env under the exported variables)
    url: str | None  # the model server, for proposers that use one
    surrogate_seconds: float
    timeout: float  # seconds one repeat may take
    databases: str  # the comparison's token (``throwaway.comparison_token``)
    version: str  # ``ax3l-compare``'s Ax3l version (``version.py``)
    logs: Path | None = None  # --logs: every repeat's logs kept here (on its machine)
    spawn: str = "fork"  # fork: services forked from a preloader; exec: each a python -m
    hosts: int = 1  # --snakelab-hosts: reference SnakeLab processes per repeat

    @property
    def log_root(self) -> Path:
        """Where the repeats' logs go on the machine each runs on: ``--logs``, else a folder
        of the temporary directory named after the comparison."""
        return self.logs or Path(tempfile.gettempdir()) / f"ax3l-compare-{self.databases}"

    def folder(self, plan: RepeatPlan) -> Path:
        return self.log_root / f"{plan.proposer}-{plan.index}"


def settings_env(env: Mapping[str, str]) -> dict[str, str]:
    """The settings of ``env`` (``SETTING_PREFIXES``): what a repeat on another machine gets."""
    return {k: v for k, v in env.items() if k.startswith(SETTING_PREFIXES)}


def node_env(settings: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """A machine's environment with its own settings replaced by ``settings``."""
    own = {k: v for k, v in environ.items() if not k.startswith(SETTING_PREFIXES)}
    return {**own, **settings}


def execute_repeat(
    plan: RepeatPlan,
    slot: int,
    job: RepeatJob,
    *,
    stop: threading.Event,
    launcher: Launcher,
    node_id: str | None = None,
) -> RepeatResult:
    """One repeat, wherever it runs: ``run_repeat`` on a database pair named after the
    comparison and the repeat's ``slot`` (its place in the plan), its logs removed when it
    finished unless ``--logs`` keeps them. First of all it checks that this machine runs
    ``ax3l-compare``'s Ax3l version (``version.VersionMismatch``, raised: no repeat of the
    comparison may run other code)."""
    version.check(job.version, _where(node_id))
    folder = job.folder(plan)
    result = run_repeat(
        plan,
        load_settings(job.env),
        job.env,
        folder,
        url=job.url,
        surrogate_seconds=job.surrogate_seconds,
        timeout=job.timeout,
        stop=stop,
        launcher=launcher,
        databases=pair_prefix(job.databases, slot),
        placement=Placement(socket.gethostname(), node_id),
        hosts=job.hosts,
    )
    if result.state == "finished" and job.logs is None:
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # the comparison's folder, once it is empty
            folder.parent.rmdir()
    return result


def _where(node_id: str | None) -> str:
    host = socket.gethostname()
    return host if node_id is None else f"Ray node {node_id[:12]} on {host}"


class ExecutorUnavailable(RuntimeError):
    """Where the repeats should run cannot take them (no Ray cluster answers, none of its
    nodes has the resource asked for)."""


class Executor(Protocol):
    """Runs a comparison's repeats (``LocalExecutor``, ``ray_executor.RayExecutor``)."""

    def prepare(self) -> None:
        """Check, before the comparison is recorded, that the repeats can run
        (``ExecutorUnavailable`` otherwise)."""

    def describe(self) -> str:
        """Where the repeats run, for the comparison's first line."""

    def submit(self, work: Sequence[RepeatPlan], job: RepeatJob) -> None:
        """Start running ``work`` (repeat ``i`` of the plan is slot ``i``)."""

    def completed(self) -> Iterator[RepeatResult]:
        """Each repeat's result once, as it ends (a repeat that could not run is a failed
        result); raises ``version.VersionMismatch`` when a machine runs another version."""

    def cancel(self) -> None:
        """Stop the repeats: those not started never start, the running ones stop their
        services and drop their databases."""

    def close(self) -> None:
        """Wait for the repeats and release what the executor holds."""


class LocalExecutor:
    """``parallel`` repeats side by side on this machine, each in a thread of its own."""

    def __init__(self, parallel: int) -> None:
        self.parallel = parallel
        self._stop = threading.Event()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._preloader: Preloader | None = None
        self._futures: list[concurrent.futures.Future[RepeatResult]] = []

    def prepare(self) -> None:
        """Nothing to check: this machine runs them."""

    def describe(self) -> str:
        return f"{self.parallel} side by side"

    def submit(self, work: Sequence[RepeatPlan], job: RepeatJob) -> None:
        launcher: Launcher = processes.launch
        if job.spawn == "fork":
            self._preloader = Preloader(processes.base_env(job.env))
            launcher = self._preloader.launch
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.parallel)
        self._futures = [
            self._pool.submit(execute_repeat, plan, slot, job, stop=self._stop, launcher=launcher)
            for slot, plan in enumerate(work)
        ]

    def completed(self) -> Iterator[RepeatResult]:
        for future in concurrent.futures.as_completed(self._futures):
            yield future.result()

    def cancel(self) -> None:
        self._stop.set()  # the running repeats stop their services and drop their databases
        for future in self._futures:
            future.cancel()

    def close(self) -> None:
        try:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
        finally:
            if self._preloader is not None:
                self._preloader.close()
