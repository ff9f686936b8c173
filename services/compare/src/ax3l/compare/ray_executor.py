"""``ax3l-compare --ray ADDRESS``: each repeat a Ray task on a node of a Ray cluster.

Needs the optional extra (``ax3l-compare[ray]``); nothing else imports this module.

* **Placement.** Each repeat is a task asking for one unit of ``--ray-resource`` (``CPU=1`` by
  default; ``snakelab=1`` for a custom resource each GPU node declares with ``ray start
  --resources``), spread over the nodes (``scheduling_strategy="SPREAD"``). ``CPU`` and ``GPU``
  are Ray's ``num_cpus``/``num_gpus``; a custom resource asks for no CPU.
* **A task** runs its repeat on its node exactly as a local repeat runs (``executor.
  execute_repeat``): it first checks that the node runs ``ax3l-compare``'s Ax3l version
  (``version.py``; a mismatch stops the comparison with both versions named), then starts its
  own SnakeLab, broker and orchestrator on the node's 127.0.0.1, forked from a preloader the
  node's worker process keeps, on throwaway databases of the shared MySQL (``DB_HOST`` must
  reach it from every node). The node's own environment is kept (PATH, HOME...); Ax3l's
  settings (``AX3L_*``, ``DB_*``, ``SNAKELAB_*``, the admin login included) come from
  ``ax3l-compare``'s. Logs go to the node's temporary directory (``--logs``: that folder on each
  node) and are removed when the repeat finished.
* **A lost node.** Ray runs the task again elsewhere, at most ``--ray-retries`` times (2);
  exceptions raised by the repeat are not retried (a failed repeat is a result). The new
  attempt drops the database pairs of earlier ones and starts over on a fresh pair. A repeat's
  result is its task's return value, which ``ax3l-compare`` alone stores: once, whatever ran.
  A node lost more often than that is a failed repeat.
* **The code** is the node's own: Ray's ``uv run`` hook, which would ship the driver's working
  directory to the nodes, is turned off (``RAY_ENABLE_UV_RUN_RUNTIME_ENV=0``).
* **Ctrl-C, SIGTERM.** Every task is cancelled (``ray.cancel``: a running one gets a
  KeyboardInterrupt, stops its services and drops its databases); those still running after
  ``CANCEL_GRACE`` seconds are killed (``force=True``; their services die with the worker,
  ``preload.die_with_parent``), and ``ax3l-compare`` drops the pairs left.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

# Each node runs the Ax3l installed there (checked, ``version.py``), never a copy of the
# driver's: Ray's hook that ships the working directory and starts every worker with ``uv run``
# when the driver runs under ``uv run`` is off (read when Ray is imported; an exported value
# wins).
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")

import ray

from ax3l.compare import processes
from ax3l.compare.executor import (
    ExecutorUnavailable,
    RepeatJob,
    execute_repeat,
    node_env,
    settings_env,
)
from ax3l.compare.preload import Forked, Preloader
from ax3l.compare.repeat import RepeatPlan, RepeatResult
from ax3l.compare.version import VersionMismatch

DEFAULT_RETRIES = 2
CANCEL_GRACE = 60.0  # seconds cancelled repeats get to stop their services and drop databases
WAIT_SECONDS = 1.0  # ray.wait's timeout: Ctrl-C is seen at least this often


@dataclass(frozen=True)
class ResourceRequest:
    """One unit of what each repeat's task asks Ray for (``--ray-resource NAME=AMOUNT``)."""

    name: str
    amount: float

    @classmethod
    def parse(cls, text: str) -> ResourceRequest:
        name, _, amount = text.partition("=")
        name = name.strip()
        try:
            value = float(amount) if amount.strip() else 1.0
        except ValueError:
            value = -1.0
        if not name or value <= 0:
            raise ValueError(
                f"--ray-resource {text!r}: NAME=AMOUNT with a positive amount, e.g. CPU=1 or"
                " snakelab=1"
            )
        return cls(name, value)

    def options(self) -> dict[str, Any]:
        """``ray.remote``'s resource options: ``CPU``/``GPU`` as Ray's own, a custom resource
        alone (no CPU asked: the resource decides how many repeats a node runs)."""
        if self.name == "CPU":
            return {"num_cpus": self.amount}
        if self.name == "GPU":
            return {"num_cpus": 0, "num_gpus": self.amount}
        return {"num_cpus": 0, "resources": {self.name: self.amount}}

    def __str__(self) -> str:
        return f"{self.name}={self.amount:g}"


# -- on a node ---------------------------------------------------------------------------------

_preloader: Preloader | None = None
_preloader_lock = threading.Lock()


def _node_launcher(name: str, args: list[str], env: dict[str, str], log_path: Path) -> Forked:
    """Start a service from this worker process's preloader (started at the first request,
    kept for the worker's later tasks, started again when it died)."""
    global _preloader
    with _preloader_lock:
        if _preloader is None or not _preloader.alive():
            _preloader = Preloader(processes.base_env(dict(os.environ)))
        found = _preloader
    return found.launch(name, args, env, log_path)


def run_task(plan: RepeatPlan, slot: int, job: RepeatJob) -> RepeatResult:
    """The body of a repeat's Ray task: ``execute_repeat`` on this node."""
    node_id = str(ray.get_runtime_context().get_node_id())
    here = replace(job, env=node_env(job.env, os.environ))
    return execute_repeat(
        plan, slot, here, stop=threading.Event(), launcher=_node_launcher, node_id=node_id
    )


# -- the driver ------------------------------------------------------------------------------

CONNECT_TIMEOUT = 5.0


def _answers(address: str) -> None:
    """``ExecutorUnavailable`` when nothing listens at a ``HOST:PORT`` address (Ray itself
    retries such an address for minutes); ``auto`` and ``ray://`` addresses are Ray's to
    resolve."""
    host, colon, port = address.rpartition(":")
    if not colon or "://" in address or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        raise ExecutorUnavailable(f"no Ray cluster at {address}: {exc}") from None


def _cause(exc: BaseException) -> BaseException:
    """The exception a task raised (``RayTaskError.cause``), else ``exc``."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


class RayExecutor:
    """Repeats as Ray tasks on the cluster at ``address`` (``auto``: Ray's own discovery)."""

    def __init__(
        self,
        address: str,
        resource: ResourceRequest,
        retries: int = DEFAULT_RETRIES,
        cancel_grace: float = CANCEL_GRACE,
    ) -> None:
        self.address = address
        self.resource = resource
        self.retries = retries
        self.cancel_grace = cancel_grace
        self._pending: dict[Any, RepeatPlan] = {}
        self._connected = False

    def describe(self) -> str:
        return (
            f"Ray tasks on the cluster at {self.address}, one {self.resource} each, at most"
            f" {self.retries} re-runs after a lost node"
        )

    def prepare(self) -> None:
        self.connect()

    def connect(self) -> dict[str, float]:
        """Join the cluster as its driver (unless this process already is one); returns its
        resources. ``ray.init`` replaces the SIGTERM handler: ``ax3l-compare``'s (cancel,
        drop) is put back."""
        if ray.is_initialized():
            self._connected = False  # a caller's connection (a test's): not ours to close
        else:
            _answers(self.address)
            handler = signal.getsignal(signal.SIGTERM)
            try:
                ray.init(
                    address=self.address,
                    logging_level=logging.WARNING,
                    log_to_driver=False,
                    configure_logging=True,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ExecutorUnavailable(f"no Ray cluster at {self.address}: {exc}") from exc
            finally:
                if threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGTERM, handler)
            self._connected = True
        # Untyped in Ray's own annotations; Any where Ray is not installed (make lint).
        found = ray.cluster_resources()  # type: ignore[no-untyped-call, unused-ignore]
        resources = {str(k): float(v) for k, v in found.items()}
        if resources.get(self.resource.name, 0.0) < self.resource.amount:
            have = ", ".join(f"{k}={v:g}" for k, v in sorted(resources.items()) if "node:" not in k)
            raise ExecutorUnavailable(
                f"no node of the Ray cluster at {self.address} has {self.resource}: the cluster"
                f" has {have}"
            )
        return resources

    def submit(self, work: Sequence[RepeatPlan], job: RepeatJob) -> None:
        if not ray.is_initialized():
            self.connect()
        task = ray.remote(
            max_retries=self.retries,
            retry_exceptions=False,
            scheduling_strategy="SPREAD",
            **self.resource.options(),
        )(run_task)
        shared = replace(job, env=settings_env(job.env))
        self._pending = {task.remote(plan, slot, shared): plan for slot, plan in enumerate(work)}

    def completed(self) -> Iterator[RepeatResult]:
        while self._pending:
            ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=WAIT_SECONDS)
            for ref in ready:
                plan = self._pending.pop(ref)
                yield self._result(ref, plan)

    def _result(self, ref: Any, plan: RepeatPlan) -> RepeatResult:
        try:
            found = ray.get(ref)
        except ray.exceptions.RayError as exc:
            cause = _cause(exc)
            if isinstance(cause, VersionMismatch):
                raise VersionMismatch(str(cause)) from None
            # Its node lost more often than the retries allow, or the worker crashed.
            return RepeatResult(plan, "failed", error=f"{type(cause).__name__}: {cause}")
        if not isinstance(found, RepeatResult):
            return RepeatResult(plan, "failed", error=f"the task returned {type(found).__name__}")
        return found

    def cancel(self) -> None:
        refs = list(self._pending)
        if not refs or not ray.is_initialized():
            return
        for ref in refs:
            ray.cancel(ref, force=False)
        deadline = time.monotonic() + self.cancel_grace
        left = refs
        while left and time.monotonic() < deadline:
            _, left = ray.wait(left, num_returns=len(left), timeout=WAIT_SECONDS)
        for ref in left:  # still running: killed (its services die with the worker)
            ray.cancel(ref, force=True)
        if left:
            ray.wait(left, num_returns=len(left), timeout=self.cancel_grace)
        self._pending.clear()

    def close(self) -> None:
        if self._connected and ray.is_initialized():
            ray.shutdown()
        self._connected = False
