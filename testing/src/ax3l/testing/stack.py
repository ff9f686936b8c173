"""A whole Ax3l stack as real processes, for end-to-end tests and benchmarks.

``Stack`` starts a reference SnakeLab on the surrogate trainer, a toolbroker, and on request a
scripted model server and orchestrator processes (whose MCP sessions are their own children),
all on free ports of 127.0.0.1 against one ``TestDatabases`` pair. The services are those of
``ax3l.shared.stack.spec``, each given only the settings it reads, as ``make run`` does, plus the
test's own (free ports, fast timings, the surrogate trainer). Helpers read the events and
SnakeLab's runs back with plain SQL, and ``check_history`` asserts the invariants every history
must keep. Test-only: it starts the reference SnakeLab, which Ax3l itself never imports.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from ax3l.shared.config_schema import load_schema
from ax3l.shared.db.snakelab_reads import configured_runs
from ax3l.shared.ports import free_port
from ax3l.shared.processes import ManagedProcess, http_ok
from ax3l.shared.stack import spec
from ax3l.shared.stack.spec import Service
from ax3l.shared.waiting import WaitTimeout, wait_until
from ax3l.testing.databases import TestDatabases
from ax3l.testing.invariants import STEP_EVENTS, Ev, check, read_events, read_history
from ax3l.testing.snakelab_process import SnakeLabProcess
from ax3l.testing.zmq_peer import ScriptedPeer

FAST_ENV = {
    "AX3L_POLL_INTERVAL": "0.05",
    "AX3L_RETRY_BACKOFF_MAX": "0.05",
    "AX3L_SNAKELAB_TIMEOUT": "3",
    "AX3L_LLM_TIMEOUT": "20",
    "AX3L_MCP_CALL_TIMEOUT": "20",
}


# The stack's processes; the name its tests use.
Proc: TypeAlias = ManagedProcess


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


class ModelServer:
    """The scripted OpenAI-compatible model server process."""

    def __init__(self, proc: Proc, port: int, record: Path):
        self.proc = proc
        self.url = f"http://127.0.0.1:{port}"
        self.record = record

    def requests(self, since: float | None = None) -> list[dict[str, Any]]:
        """Every request body received, in order (only those received after the ``time.time()``
        moment ``since``, when given)."""
        if not self.record.exists():
            return []
        # Only whole lines: the server may be halfway through appending the newest request.
        lines = self.record.read_text().split("\n")[:-1]
        entries = [json.loads(line) for line in lines if line]
        return [e["body"] for e in entries if since is None or e["received_at"] > since]


def narrowed_schema(changes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The bundled schema with some leaves' rules replaced, e.g.
    ``{"model.hidden_size": {"minimum": 208, "maximum": 240}}`` or ``{"training.gamma":
    {"const": 0.96}}`` (a const leaf has one legal value, so its entry is exhausted at once)."""
    document = copy.deepcopy(load_schema().document)
    for path, keywords in changes.items():
        node = document
        for part in path.split("."):
            node = node["properties"][part]
        if "const" in keywords:
            for key in ("minimum", "maximum", "multipleOf"):
                node.pop(key, None)
            node["default"] = keywords["const"]
        else:
            node.pop("const", None)
        node.update(keywords)
    return document


class Stack:
    """SnakeLab, broker, and on demand a model server and orchestrators, for one test."""

    def __init__(self, databases: TestDatabases, folder: Path):
        self.databases = databases
        self.folder = folder
        self.schema_path: Path | None = None
        self.snakelab: SnakeLabProcess | None = None
        self.front: ScriptedPeer | None = None  # what the services reach SnakeLab through
        self.extra_hosts: list[SnakeLabProcess] = []  # start(hosts=n): the other hosts
        self.hosts = 1
        self.surrogate_seconds = 0.0
        self.broker_env: dict[str, str] = {}  # the broker's own settings (set before start)
        self.broker: Proc | None = None
        self.broker_port = 0  # the latest broker's REST port
        self.broker_endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.procs: list[Proc] = []
        self.models: list[ModelServer] = []
        self._conn: Any = None

    # -- processes ------------------------------------------------------------------------

    def use_schema(self, document: dict[str, Any]) -> Path:
        """Run SnakeLab, the broker and the orchestrator on this schema (call before start)."""
        self.schema_path = self.folder / "schema.json"
        self.schema_path.write_text(json.dumps(document))
        return self.schema_path

    def base_env(self) -> dict[str, str]:
        """Every setting of this stack (the whole environment, but no crash hook): what make
        run's stack_env is to its services, each of which gets its own part (``spawn``)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AX3L_TEST_CRASH")}
        env.update(self.databases.env())
        env["AX3L_ZMQ_ENDPOINT"] = self.broker_endpoint
        if self.front is not None:
            env["AX3L_SNAKELAB_ENDPOINT"] = self.front.endpoint
        elif self.snakelab is not None:
            env["AX3L_SNAKELAB_ENDPOINT"] = self.snakelab.endpoint
        if self.snakelab is not None and self.extra_hosts:
            endpoints = [self.snakelab.endpoint, *(h.endpoint for h in self.extra_hosts)]
            env["AX3L_SNAKELAB_ENDPOINTS"] = ",".join(endpoints)
        if self.schema_path is not None:
            env["AX3L_SCHEMA_PATH"] = str(self.schema_path)
            env["SNAKELAB_SCHEMA_PATH"] = str(self.schema_path)
        return env

    def start(
        self,
        surrogate_seconds: float = 0.0,
        front: Callable[[str], ScriptedPeer] | None = None,
        hosts: int = 1,
    ) -> Stack:
        """Start SnakeLab and the broker side by side and wait until both answer.

        ``front``, given SnakeLab's endpoint, builds the peer the services talk to instead (for
        example ``zmq_peer.stalling_snakelab``); the tests' own reads go to SnakeLab itself.
        ``hosts`` > 1: that many reference SnakeLab processes on the one database (host ids
        h0, h1, ...; ``extra_hosts`` are all but the first), named to the services by
        ``AX3L_SNAKELAB_ENDPOINTS``.
        """
        self.hosts, self.surrogate_seconds = hosts, surrogate_seconds
        self.snakelab = self._snakelab_host(0)
        self.extra_hosts = [self._snakelab_host(number) for number in range(1, hosts)]
        if front is not None:
            self.front = front(self.snakelab.endpoint)
        broker = self._spawn_broker()
        for other in self.extra_hosts:
            other.start()
        self.snakelab.start()
        assert self.broker is not None
        self.broker.wait_ready(broker.healthy, 30)
        return self

    def _snakelab_host(
        self, number: int, port: int | None = None, events_port: int | None = None
    ) -> SnakeLabProcess:
        """SnakeLab host ``number`` as ``start`` makes it, not yet started: host 0 logs in
        ``folder``, each other host in ``host-<number>``."""
        extra = {"SNAKELAB_SCHEMA_PATH": str(self.schema_path)} if self.schema_path else {}
        if self.hosts > 1:
            extra["SNAKELAB_HOST_ID"] = f"h{number}"
        folder = self.folder / f"host-{number}" if number else self.folder
        folder.mkdir(exist_ok=True)
        return SnakeLabProcess(
            self.databases.env(),
            trainer="surrogate",
            seconds=self.surrogate_seconds,
            port=port,
            events_port=events_port,
            extra_env={**extra, "SNAKELAB_LOG_LEVEL": "WARNING"},
            log_dir=folder,
        )

    def restart_snakelab(self) -> SnakeLabProcess:
        """SIGKILL SnakeLab and start it again on the same ports (it fails its lost runs)."""
        old = self.snakelab
        assert old is not None
        old.kill()
        old.close()
        self.snakelab = self._snakelab_host(0, old.port, old.events_port).start()
        return self.snakelab

    def spawn(
        self, name: str, log: Path, overrides: Mapping[str, str], args: Sequence[str] = ()
    ) -> tuple[Proc, Service]:
        """Start the stack's service ``name`` (``ax3l.shared.stack.spec``) as ``python -m``,
        its settings filtered from ``base_env`` as make run filters them, ``overrides`` on top."""
        env = self.base_env()
        service = spec.service(name, {**env, **overrides})
        command = [*service.argv(sys.executable), *args]
        proc = Proc(name, command, service.environment(env, overrides), log)
        self.procs.append(proc)
        return proc, service

    def _spawn_broker(self) -> Service:
        port = free_port()
        overrides = {**self.broker_env, "AX3L_TOOLBROKER_PORT": str(port)}
        self.broker, service = self.spawn("toolbroker", self.folder / "toolbroker.log", overrides)
        self.broker_port = port
        return service

    def start_broker(self) -> Proc:
        """Start (another) broker on the same endpoint and wait until it answers."""
        service = self._spawn_broker()
        assert self.broker is not None
        self.broker.wait_ready(service.healthy, 30)
        return self.broker

    def start_model(self, script: dict[str, Any]) -> ModelServer:
        port = free_port()
        number = len(self.models)
        script_path = self.folder / f"model-script-{number}.json"
        script_path.write_text(json.dumps(script))
        record = self.folder / f"model-requests-{number}.jsonl"
        command = [sys.executable, "-m", "ax3l.testing.scripted_llm", "--port", str(port)]
        command += ["--script", str(script_path), "--record", str(record)]
        log = self.folder / f"model-{number}.log"
        proc = Proc("scripted-model", command, dict(os.environ), log)
        self.procs.append(proc)
        proc.wait_ready(lambda: http_ok(f"http://127.0.0.1:{port}/health"), 20)
        model = ModelServer(proc, port, record)
        self.models.append(model)
        return model

    def orchestrator(
        self,
        proposer: str | None = "random",
        *,
        url: str | None = None,
        crash_at: str | None = None,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ) -> Proc:
        """Start an orchestrator (not waiting for anything)."""
        self.api_port = free_port()
        overrides = {**FAST_ENV, "AX3L_ORCHESTRATOR_PORT": str(self.api_port), **(env or {})}
        if proposer:
            overrides["AX3L_PROPOSER"] = proposer
        if url:
            overrides["AX3L_LLM_URL"] = url
        if crash_at:
            overrides["AX3L_TEST_CRASH_AT"] = crash_at
        number = sum(1 for p in self.procs if p.name == "orchestrator")
        log = self.folder / f"orchestrator-{number}.log"
        return self.spawn("orchestrator", log, overrides, args or [])[0]

    def crash_at(self, point: str, timeout: float = 60.0, **kwargs: Any) -> Proc:
        """Start an orchestrator armed to SIGKILL itself at ``point`` and wait for that."""
        proc = self.orchestrator(crash_at=point, **kwargs)
        code = proc.wait(timeout)
        assert code == -signal.SIGKILL, f"exit {code}, expected SIGKILL at {point}:\n" + (
            proc.log_tail()
        )
        return proc

    def close(self) -> None:
        """Kill everything: the databases are dropped next, nothing needs a clean shutdown."""
        for proc in reversed(self.procs):
            proc.kill()
        if self.front is not None:
            self.front.close()
        for other in self.extra_hosts:
            other.kill()
            other.close()
        if self.snakelab is not None:
            self.snakelab.kill()
            self.snakelab.close()
        if self._conn is not None:
            self._conn.close()

    # -- reading the databases ------------------------------------------------------------

    def reconnect(self) -> None:
        """Drop the connection the helpers read with (after a database restart)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def connection(self) -> Any:
        """The admin connection the helpers read with (autocommit: every read sees the latest)."""
        if self._conn is None:
            self._conn = self.databases.connect("admin", self.databases.ax3l_db)
        return self._conn

    def _cursor(self) -> Any:
        return self.connection().cursor()

    def events(self, *names: str) -> list[Ev]:
        """Events (all, or with one of ``names``), oldest first."""
        return [e for e in read_events(self.connection()) if not names or e.name in names]

    def count(self, *names: str) -> int:
        """How many events have one of ``names`` (cheap enough to poll)."""
        with self._cursor() as cur:
            cur.execute(
                f"SELECT COUNT(*) FROM events WHERE name IN ({', '.join(['%s'] * len(names))})",
                names,
            )
            return int(cur.fetchone()[0])

    def highscores(self) -> list[tuple[int, int, int, int | None]]:
        """``(event_id, simulations, score, seed)`` rows."""
        with self._cursor() as cur:
            cur.execute(
                "SELECT event_id, simulations, score, seed FROM experiment_highscores"
                " ORDER BY event_id"
            )
            return [tuple(row) for row in cur.fetchall()]

    def runs(self) -> list[dict[str, Any]]:
        """SnakeLab's runs with their seed and tuned columns, in submission order."""
        with self._cursor() as cur:
            return configured_runs(cur, self.databases.snakelab_db)

    def wait_runs_recorded(self, timeout: float = 30.0) -> None:
        """Wait until every SnakeLab run has its ``simulation_submitted``: a submission the
        broker was making as the stack stopped is logged moments after SnakeLab stored it, and
        the history is read once every run has its events."""
        self.wait_for(
            lambda: (
                {r["run_id"] for r in self.runs()}
                <= {e.process_id for e in self.events("simulation_submitted")}
            ),
            timeout,
            "the broker to log its last submission",
        )

    def wait_for(
        self,
        condition: Callable[[], Any],
        timeout: float = 60.0,
        what: str = "",
        proc: Proc | None = None,
    ) -> Any:
        """Poll ``condition`` until truthy; fail with ``proc``'s log at the deadline, or as
        soon as ``proc`` exits."""
        try:
            return wait_until(
                condition, timeout, what, interval=0.05, give_up=proc.exited if proc else None
            )
        except WaitTimeout as timeout_error:
            if proc is None:
                raise
            reason = f"{timeout_error} before {what}" if not proc.alive() else str(timeout_error)
            raise proc.failure(reason) from None

    def status(self) -> dict[str, Any]:
        return dict(http_json(f"http://127.0.0.1:{self.api_port}/api/status"))


@dataclass
class HistorySummary:
    steps: list[int]  # completed step indices, in order
    runs: list[dict[str, Any]]
    goldens: list[Ev]
    compared: list[Ev]


def check_history(stack: Stack) -> HistorySummary:
    """Assert every history invariant (``ax3l.testing.invariants``: the chaos tier's and the
    soak's too) on the stack's databases; returns a summary for the test's own assertions."""
    history = read_history(stack.connection(), stack.databases.snakelab_db)
    failed = [invariant for invariant in check(history) if not invariant.passed]
    assert not failed, "\n".join(
        f"{invariant.name}: {violation}"
        for invariant in failed
        for violation in invariant.violations[:5]
    )
    events = stack.events()
    steps = [
        e.get("index") for e in events if e.name in STEP_EVENTS and isinstance(e.get("index"), int)
    ]
    return HistorySummary(
        steps,
        stack.runs(),
        [e for e in events if e.name == "golden_config_created"],
        [e for e in events if e.name == "configuration_compared"],
    )


# Every setting but hidden size fixed to its default: those entries are exhausted at once.
FIXED_EXCEPT_HIDDEN_SIZE: dict[str, dict[str, Any]] = {
    "training.sequence_length": {"const": 8},
    "training.batch_size": {"const": 24},
    "training.learning_rate": {"const": 0.0021},
    "training.gamma": {"const": 0.96},
    "epsilon.initial": {"const": 0.96},
    "epsilon.decay": {"const": 0.97},
    "game.rewards.closer_to_food": {"const": 2},
    "game.rewards.further_from_food": {"const": -2},
}


def tiny_schema(**hidden_size: Any) -> dict[str, Any]:
    """Only hidden size tunable, {208, 224} unless ``hidden_size`` says otherwise: a cycle costs
    at most one run and seed rotations come quickly."""
    rules = {"minimum": 208, "maximum": 224, **hidden_size}
    return narrowed_schema({"model.hidden_size": rules, **FIXED_EXCEPT_HIDDEN_SIZE})
