"""The control socket's methods: what each one checks, changes and answers.

Implemented: ``health``, ``simulation.submit``, ``simulation.status``, ``simulation.active``,
``simulation.pause``, ``simulation.resume``, ``simulation.cancel`` (the contract), plus
``simulation.snapshot`` (``{"run_id"}`` -> ``{"run_id", "snapshot"}``, the best game of a
completed run of this process, else ``snapshot_unavailable``) and ``simulation.frames``
(``{"run_id"}``: this server records no frames, so a known run always answers
``frames_unavailable``). Telemetry is not implemented. Other methods: ``unknown_method``.

State rules (anything else is ``invalid_run_state``):

* pause: ``running`` -> ``paused`` (the trainer stops at its next episode boundary);
  pausing a paused run answers its status unchanged.
* resume: ``paused`` -> ``running``; resuming a running run answers its status unchanged.
* cancel: ``queued`` -> ``cancelled`` at once; ``running``/``paused`` -> ``cancelling``,
  then ``cancelled`` when the trainer stops; cancelling a cancelling run answers its status.

Payloads are exact: a missing, extra or mistyped key is ``invalid_request``; a config that
breaks the schema or the server's rules is ``invalid_config``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from ax3l.shared.config_schema import ConfigInvalid, ConfigSchema
from snakelab.config_rules import complete_config, config_hash
from snakelab.envelope import RequestRefused
from snakelab.run_store import RunStore, utc_now
from snakelab.runs import TERMINAL, Run, RunBook
from snakelab.version import PROJECT_VERSION, SERVICE_NAME

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def _exact_keys(method: str, payload: dict[str, Any], *keys: str) -> None:
    found = set(payload)
    if extra := sorted(found - set(keys)):
        raise RequestRefused("invalid_request", f"{method}: unexpected key(s): {', '.join(extra)}")
    if missing := sorted(set(keys) - found):
        raise RequestRefused("invalid_request", f"{method}: missing key(s): {', '.join(missing)}")


def _run_id(method: str, payload: dict[str, Any]) -> str:
    _exact_keys(method, payload, "run_id")
    run_id = payload["run_id"]
    if not isinstance(run_id, str) or not run_id:
        raise RequestRefused("invalid_request", f"{method}: run_id must be a non-empty string")
    return run_id


class ControlMethods:
    """Dispatch of one request's method and payload to the run book and the store."""

    def __init__(
        self,
        book: RunBook,
        store: RunStore,
        schema: ConfigSchema,
        on_ended: Callable[[Run], None] | None = None,
    ):
        self.book = book
        self.store = store
        self.schema = schema
        self.on_ended = on_ended
        self.handlers: dict[str, Handler] = {
            "health": self.health,
            "simulation.submit": self.submit,
            "simulation.status": self.status,
            "simulation.active": self.active,
            "simulation.pause": self.pause,
            "simulation.resume": self.resume,
            "simulation.cancel": self.cancel,
            "simulation.snapshot": self.snapshot,
            "simulation.frames": self.frames,
        }

    def dispatch(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        handler = self.handlers.get(method)
        if handler is None:
            raise RequestRefused("unknown_method", f"unknown method {method!r}")
        return handler(payload)

    def health(self, payload: dict[str, Any]) -> dict[str, Any]:
        _exact_keys("health", payload)
        return {"service": SERVICE_NAME, "project_version": PROJECT_VERSION}

    def submit(self, payload: dict[str, Any]) -> dict[str, Any]:
        _exact_keys("simulation.submit", payload, "config")
        partial = payload["config"]
        if not isinstance(partial, dict):
            raise RequestRefused("invalid_config", "$: the config must be a JSON object")
        try:
            config = complete_config(self.schema, partial)
        except ConfigInvalid as exc:
            raise RequestRefused("invalid_config", "; ".join(exc.errors)) from None
        run = Run(
            run_id=str(uuid.uuid4()),
            config=config,
            epochs=int(config["epochs"]),
            created_at=utc_now(),
        )
        self.store.insert_run(
            run.run_id, config_hash(config), self.schema.flatten(config), run.created_at
        )
        position = self.book.add(run)
        return {"run_id": run.run_id, "state": "queued", "queue_position": position}

    def status(self, payload: dict[str, Any]) -> dict[str, Any]:
        run_id = _run_id("simulation.status", payload)
        with self.book.changed:
            return self.book.get(run_id).status()

    def active(self, payload: dict[str, Any]) -> dict[str, Any]:
        _exact_keys("simulation.active", payload)
        with self.book.changed:
            run = self.book.active()
            return {"run": None if run is None else run.status()}

    # The state changes hold the book's lock across their database write, so the worker
    # cannot take, finish or re-pause the run between the check and the write.

    def pause(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self._move(
            _run_id("simulation.pause", payload), "running", "paused", ("queued", "running")
        )

    def resume(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self._move(_run_id("simulation.resume", payload), "paused", "running", ("paused",))

    def _move(
        self, run_id: str, source: str, target: str, stored_from: tuple[str, ...]
    ) -> dict[str, Any]:
        """A ``source`` run moves to ``target`` (stored, when its row is in ``stored_from``);
        one already in ``target`` stays; any other state is refused."""
        with self.book.changed:
            run = self.book.get(run_id)
            if run.state == source:
                self.store.change_state(run_id, target, stored_from)
                run.state = target
                self.book.changed.notify_all()
            elif run.state != target:
                verb = {"paused": "pauses", "running": "resumes"}[target]
                raise RequestRefused(
                    "invalid_run_state", f"run {run_id} is {run.state}; only a {source} run {verb}"
                )
            return run.status()

    def cancel(self, payload: dict[str, Any]) -> dict[str, Any]:
        run_id = _run_id("simulation.cancel", payload)
        ended = False
        with self.book.changed:
            run = self.book.get(run_id)
            if run.state == "queued":
                now = utc_now()
                self.store.cancel_queued(run_id, now)
                self.book.queue.remove(run)
                run.state, run.completed_at, run.config = "cancelled", now, None
                ended = True
            elif run.state in ("running", "paused"):
                self.store.change_state(run_id, "cancelling", ("queued", "running", "paused"))
                run.state = "cancelling"
                run.stop_requested = True
            elif run.state in TERMINAL:
                raise RequestRefused("invalid_run_state", f"run {run_id} is already {run.state}")
            self.book.changed.notify_all()
            status = run.status()
        if ended and self.on_ended is not None:
            self.on_ended(run)
        return status

    def snapshot(self, payload: dict[str, Any]) -> dict[str, Any]:
        run_id = _run_id("simulation.snapshot", payload)
        with self.book.changed:
            run = self.book.get(run_id)
            if run.snapshot is None:
                why = "has no best game" if run.state == "completed" else f"is {run.state}"
                raise RequestRefused(
                    "snapshot_unavailable", f"run {run_id} {why}; snapshots exist once completed"
                )
            return {"run_id": run_id, "snapshot": run.snapshot}

    def frames(self, payload: dict[str, Any]) -> dict[str, Any]:
        run_id = _run_id("simulation.frames", payload)
        with self.book.changed:
            self.book.get(run_id)
        raise RequestRefused(
            "frames_unavailable", f"run {run_id} has no frames: this SnakeLab records none"
        )
