"""A whole Ax3l stack as real processes, for end-to-end tests and benchmarks.

``Stack`` starts a reference SnakeLab on the surrogate trainer, a toolbroker, and on request a
scripted model server and orchestrator processes (whose MCP sessions are their own children),
all on free ports of 127.0.0.1 against one ``TestDatabases`` pair. Helpers read the events and
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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from ax3l.shared.config_schema import BUNDLED_SCHEMA
from ax3l.shared.event_models import EventContent, read_content
from ax3l.shared.ports import free_port
from ax3l.shared.processes import ManagedProcess, http_ok
from ax3l.shared.registry import ENTRIES, PARAMETER_ORDER
from ax3l.shared.waiting import WaitTimeout, wait_until
from ax3l.shared.wire import TERMINAL_STATES
from ax3l.testing.databases import TestDatabases
from ax3l.testing.snakelab_process import SnakeLabProcess
from ax3l.testing.zmq_peer import ScriptedPeer

FAST_ENV = {
    "AX3L_POLL_INTERVAL": "0.05",
    "AX3L_RETRY_BACKOFF_MAX": "0.05",
    "AX3L_SNAKELAB_TIMEOUT": "3",
    "AX3L_LLM_TIMEOUT": "20",
    "AX3L_MCP_CALL_TIMEOUT": "20",
}


@dataclass(frozen=True)
class Ev:
    """An event as stored."""

    event_id: int
    name: str
    level: str
    process_id: str | None
    parent: int | None
    source_name: str | None
    parameter: str | None
    content: Any

    def get(self, key: str, default: Any = None) -> Any:
        """A key of the content as stored (malformed rows included)."""
        return self.content.get(key, default) if isinstance(self.content, dict) else default

    @property
    def model(self) -> EventContent:
        """The content as its event's model, read as the product's typed reads read it
        (``ax3l.shared.event_models.read_content``)."""
        return read_content(self.name, self.content)


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


def bundled_schema() -> dict[str, Any]:
    from importlib import resources

    text = resources.files("ax3l.shared.schema").joinpath(BUNDLED_SCHEMA).read_text("utf-8")
    return dict(json.loads(text))


def narrowed_schema(changes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The bundled schema with some leaves' rules replaced, e.g.
    ``{"model.hidden_size": {"minimum": 208, "maximum": 240}}`` or ``{"training.gamma":
    {"const": 0.96}}`` (a const leaf has one legal value, so its entry is exhausted at once)."""
    document = copy.deepcopy(bundled_schema())
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
        env = {k: v for k, v in os.environ.items() if not k.startswith("AX3L_TEST_CRASH")}
        env.update(self.databases.env())
        env["AX3L_ZMQ_ENDPOINT"] = self.broker_endpoint
        if self.front is not None:
            env["AX3L_SNAKELAB_ENDPOINT"] = self.front.endpoint
        elif self.snakelab is not None:
            env["AX3L_SNAKELAB_ENDPOINT"] = self.snakelab.endpoint
        if self.schema_path is not None:
            env["AX3L_SCHEMA_PATH"] = str(self.schema_path)
            env["SNAKELAB_SCHEMA_PATH"] = str(self.schema_path)
        return env

    def start(
        self,
        surrogate_seconds: float = 0.0,
        front: Callable[[str], ScriptedPeer] | None = None,
    ) -> Stack:
        """Start SnakeLab and the broker side by side and wait until both answer.

        ``front``, given SnakeLab's endpoint, builds the peer the services talk to instead (for
        example ``zmq_peer.stalling_snakelab``); the tests' own reads go to SnakeLab itself.
        """
        extra = {"SNAKELAB_SCHEMA_PATH": str(self.schema_path)} if self.schema_path else {}
        self.snakelab = SnakeLabProcess(
            self.databases.env(),
            trainer="surrogate",
            seconds=surrogate_seconds,
            extra_env={**extra, "SNAKELAB_LOG_LEVEL": "WARNING"},
            log_dir=self.folder,
        )
        if front is not None:
            self.front = front(self.snakelab.endpoint)
        broker_port = self._spawn_broker()
        self.snakelab.start()
        assert self.broker is not None
        self.broker.wait_ready(lambda: http_ok(f"http://127.0.0.1:{broker_port}/health"), 30)
        return self

    def restart_snakelab(self) -> SnakeLabProcess:
        """SIGKILL SnakeLab and start it again on the same ports (it fails its lost runs)."""
        old = self.snakelab
        assert old is not None
        old.kill()
        old.close()
        self.snakelab = SnakeLabProcess(
            self.databases.env(),
            trainer="surrogate",
            seconds=float(old.env["SNAKELAB_SURROGATE_SECONDS"]),
            port=old.port,
            events_port=old.events_port,
            extra_env={k: v for k, v in old.env.items() if k.startswith("SNAKELAB_")},
            log_dir=self.folder,
        ).start()
        return self.snakelab

    def _spawn_broker(self) -> int:
        port = free_port()
        env = {**self.base_env(), **self.broker_env, "AX3L_TOOLBROKER_PORT": str(port)}
        proc = Proc(
            "toolbroker",
            [sys.executable, "-m", "ax3l.toolbroker", "--zmq-endpoint", self.broker_endpoint],
            env,
            self.folder / "toolbroker.log",
        )
        self.procs.append(proc)
        self.broker = proc
        self.broker_port = port
        return port

    def start_broker(self) -> Proc:
        """Start (another) broker on the same endpoint and wait until it answers."""
        port = self._spawn_broker()
        assert self.broker is not None
        self.broker.wait_ready(lambda: http_ok(f"http://127.0.0.1:{port}/health"), 30)
        return self.broker

    def start_model(self, script: dict[str, Any]) -> ModelServer:
        port = free_port()
        number = len(self.models)
        script_path = self.folder / f"model-script-{number}.json"
        script_path.write_text(json.dumps(script))
        record = self.folder / f"model-requests-{number}.jsonl"
        proc = Proc(
            "scripted-model",
            [
                sys.executable,
                "-m",
                "ax3l.testing.scripted_llm",
                "--port",
                str(port),
                "--script",
                str(script_path),
                "--record",
                str(record),
            ],
            dict(os.environ),
            self.folder / f"model-{number}.log",
        )
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
        full_env = {
            **self.base_env(),
            **FAST_ENV,
            "AX3L_ORCHESTRATOR_PORT": str(self.api_port),
            **(env or {}),
        }
        if proposer:
            full_env["AX3L_PROPOSER"] = proposer
        if url:
            full_env["AX3L_LLM_URL"] = url
        if crash_at:
            full_env["AX3L_TEST_CRASH_AT"] = crash_at
        number = sum(1 for p in self.procs if p.name == "orchestrator")
        proc = Proc(
            "orchestrator",
            [sys.executable, "-m", "ax3l.orchestrator", *(args or [])],
            full_env,
            self.folder / f"orchestrator-{number}.log",
        )
        self.procs.append(proc)
        return proc

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

    def _cursor(self) -> Any:
        if self._conn is None:
            self._conn = self.databases.connect("admin", self.databases.ax3l_db)
        return self._conn.cursor()

    def events(self, *names: str) -> list[Ev]:
        """Events (all, or with one of ``names``), oldest first."""
        where = ""
        args: tuple[Any, ...] = ()
        if names:
            where = f"WHERE e.name IN ({', '.join(['%s'] * len(names))})"
            args = names
        with self._cursor() as cur:
            cur.execute(
                "SELECT e.event_id, e.name, e.log_level, e.process_id, e.parent_event_id,"
                " e.source_name, e.parameter, m.content FROM events e"
                f" LEFT JOIN event_messages m ON m.event_id = e.event_id {where}"
                " ORDER BY e.event_id",
                args,
            )
            rows = cur.fetchall()
        found = []
        for row in rows:
            content = row[7]
            if content is not None:
                try:
                    content = json.loads(content)
                except ValueError:
                    pass
            found.append(Ev(int(row[0]), row[1], row[2], row[3], row[4], row[5], row[6], content))
        return found

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
            cur.execute(
                f"SELECT r.run_id, r.status, r.high_score, c.* FROM"
                f" `{self.databases.snakelab_db}`.simulation_runs r JOIN"
                f" `{self.databases.snakelab_db}`.configurations c ON c.run_id = r.run_id"
                " ORDER BY r.id"
            )
            columns = [d[0] for d in cur.description]
            return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]

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


TERMINAL = ("simulation_completed", "simulation_failed", "simulation_cancelled")
DECISIONS = ("golden_config_created", "golden_config_retained")


@dataclass
class HistorySummary:
    steps: list[int]  # completed step indices, in order
    runs: list[dict[str, Any]]
    goldens: list[Ev]
    compared: list[Ev]


def check_history(stack: Stack) -> HistorySummary:
    """The invariants every history must keep, whatever crashed where; returns a summary.

    No run submitted twice, every stage logged once per run, steps completed in order without
    gaps or repeats, every comparison decided once by the strictly-higher rule, every golden
    with its score snapshot.
    """
    from ax3l.shared import cycles as shared_cycles

    events = stack.events()
    runs = stack.runs()
    columns = [c for c in runs[0] if c not in ("run_id", "status", "high_score")] if runs else []
    by_run: dict[str, list[Ev]] = {}
    for event in events:
        if event.process_id:
            by_run.setdefault(event.process_id, []).append(event)
    _check_repeats(runs, columns, by_run)
    for run in runs:
        names = [e.name for e in by_run.get(run["run_id"], [])]
        assert names.count("simulation_submitted") == 1, (run["run_id"], names)
        assert names.count("simulation_started") <= 1, names
        assert sum(names.count(n) for n in TERMINAL) <= 1, names
        assert names.count("configuration_compared") <= 1, names
        assert names.count("proposal_accepted") <= 1, names

    compared = [e for e in events if e.name == "configuration_compared"]
    for i, compare in enumerate(compared):
        decisions = [e for e in events if e.name in DECISIONS and e.parent == compare.event_id]
        if i < len(compared) - 1:
            assert len(decisions) == 1, f"comparison {compare.event_id} decided {len(decisions)}x"
        else:
            assert len(decisions) <= 1
        # Only a run that completed can win: a failed run keeps the high score it reached
        # before it failed (SnakeLab killed mid-run), but is never promoted.
        expected = (
            "golden_config_created"
            if compare.get("state") == "completed"
            and compare.get("high_score") is not None
            and compare.get("high_score") > compare.get("golden_high_score")
            else "golden_config_retained"
        )
        assert all(d.name == expected for d in decisions), (compare.content, decisions)
        golden_before = [
            e for e in events if e.name == "golden_config_created" and e.event_id < compare.event_id
        ][-1]
        assert compare.get("golden_high_score") == golden_before.get("high_score")
        assert compare.get("current_golden_run_id") == golden_before.get("run_id")

    steps = [
        e.get("index")
        for e in events
        if e.name in ("configuration_compared", "parameter_space_exhausted")
        and isinstance(e.get("index"), int)
    ]
    assert steps == [i % len(ENTRIES) for i in range(len(steps))], f"steps out of order: {steps}"

    for accepted in (e for e in events if e.name == "proposal_accepted"):
        checkpoint = [
            e
            for e in events
            if e.name == "round_robin_checkpoint" and e.event_id < accepted.event_id
        ][-1]
        assert accepted.get("parameter") == PARAMETER_ORDER[checkpoint.get("index")]
        of_run = [c for c in compared if c.process_id == accepted.get("run_id")]
        if of_run:
            assert of_run[0].get("index") == checkpoint.get("index")

    goldens = [e for e in events if e.name == "golden_config_created"]
    snapshots = stack.highscores()
    assert [row[0] for row in snapshots] == [g.event_id for g in goldens]
    for golden, (_, simulations, score, seed) in zip(goldens, snapshots, strict=True):
        assert (score, seed) == (golden.get("high_score"), golden.get("seed"))
        assert simulations == golden.get("simulations")
        run = next(r for r in runs if r["run_id"] == golden.get("run_id"))
        assert run["high_score"] == score and run["seed"] == seed

    theirs = shared_cycles.count_cycles((e.event_id, e.name, e.content) for e in events)
    assert theirs.complete == len(steps) // len(ENTRIES)
    _check_proposals_compared(events, runs)
    return HistorySummary(steps, runs, goldens, compared)


def _check_proposals_compared(events: list[Ev], runs: list[dict[str, Any]]) -> None:
    """At most one accepted proposal per checkpoint, and every accepted proposal whose run (or
    its infrastructure retry's) reached a terminal state is compared; the newest may be
    pending."""
    accepted = [e for e in events if e.name == "proposal_accepted"]
    per_checkpoint = Counter(
        e.get("checkpoint_event_id") for e in accepted if e.get("checkpoint_event_id") is not None
    )
    assert all(n == 1 for n in per_checkpoint.values()), f"two proposals for one turn: {accepted}"
    compared = Counter(e.process_id for e in events if e.name == "configuration_compared")
    ended = {r["run_id"] for r in runs if r["status"] in TERMINAL_STATES}
    for proposal in accepted[:-1]:
        # An infrastructure retry's run (parent: the proposal) is the step's run instead.
        chain = [proposal.get("run_id") or proposal.process_id] + [
            e.process_id
            for e in events
            if e.name == "simulation_submitted"
            and e.source_name == "InfraRetry"
            and e.parent == proposal.event_id
        ]
        if any(run in ended for run in chain):
            assert sum(compared[run] for run in chain) == 1, (proposal.content, chain, compared)


def _check_repeats(
    runs: list[dict[str, Any]], columns: list[str], by_run: dict[str, list[Ev]]
) -> None:
    """A configuration stored twice only as the loop's own attempt after a run without a score
    (a baseline run again, or the retry of a run that never trained), recorded as attempt n."""
    seen: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for run in runs:
        key = tuple(run[c] for c in columns)
        earlier = seen.setdefault(key, [])
        if earlier:
            submitted = [
                e for e in by_run.get(run["run_id"], []) if e.name == "simulation_submitted"
            ]
            assert submitted and submitted[0].get("attempt") == len(earlier) + 1, (
                "a configuration was submitted twice",
                run["run_id"],
                [e.content for e in submitted],
            )
            assert all(
                r["status"] in ("failed", "cancelled") or r["high_score"] is None for r in earlier
            ), ("a configuration was submitted again after a scored run", run["run_id"])
        earlier.append(run)


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
