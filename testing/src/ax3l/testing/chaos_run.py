"""The chaos scenario of issues 11 and 21: the whole stack SIGKILLed and frozen (SIGSTOP, then
SIGCONT) at random moments, then checked.

    uv run python -m ax3l.testing.chaos_run          # what `make test-chaos` runs (via pytest)

Settings (environment): ``AX3L_CHAOS_SEED`` (default 11), ``AX3L_CHAOS_KILLS`` (40),
``AX3L_CHAOS_FREEZES`` (20), ``AX3L_CHAOS_FREEZE_SECONDS`` ("1,8": how long a freeze lasts,
uniform), ``AX3L_CHAOS_INTERVAL`` ("1.5,6.5": seconds between disturbances, uniform),
``AX3L_CHAOS_RUN_SECONDS`` (1.5: surrogate run time), ``AX3L_CHAOS_STAGNANT_ROUNDS`` (2, so seed
rotations happen), ``AX3L_CHAOS_RECOVERY_DEADLINE`` (90 s for 3 new steps after the last
disturbance), ``AX3L_CHAOS_PROMOTION`` (single; confirm or race runs the loop under that
promotion policy), ``AX3L_CHAOS_GOLDEN`` (spec; model: the golden follows the model of every
run), ``AX3L_CHAOS_HOSTS`` (1; 2 adds a second SnakeLab host, ``snakelab-2``, on the same
database, killed like the others). The first half of the kills runs
``AX3L_CHAOS_PROPOSER`` (tpe), the second half the scripted model (``llm``).

Kills and freezes come in one shuffled sequence. Half of the freezes are SnakeLab's; the others
hit MariaDB (twice the share of the others), the broker and the orchestrator (with its MCP
sessions). Half of SnakeLab's and of MariaDB's are timed to a submission: the driver waits for
the broker's next ``tool_request_received`` (the first thing it writes for a proposal) and, for
the intent timing, then for its submission intent (its last write before ``simulation.submit``)
and freezes the victim at once, so the broker's 3 s submit may time out while SnakeLab holds or
is storing the run (``plan`` says which victim gets which timing). The rest come at random
moments. Freezes run beside the sequence: a
kill may hit a frozen service (some kills pick one on purpose). Every freeze is resumed, also
when the driver fails (``Freezer.resume_all`` in a ``finally``).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ax3l.shared.db.cli import ensure_schema
from ax3l.shared.ports import free_port
from ax3l.shared.processes import ManagedProcess
from ax3l.shared.stack import spec
from ax3l.shared.stack.mariadb import PrivateMariaDB
from ax3l.shared.stack.supervisor import Child, Death, Restart, RestartPolicy, Supervisor
from ax3l.testing import chaos
from ax3l.testing.chaos import ProgressMonitor
from ax3l.testing.databases import TestDatabases
from ax3l.testing.invariants import Invariant, check_invariants
from ax3l.testing.scripted_llm import random_call_ranges

TARGETS = ("orchestrator", "toolbroker", "snakelab", "mariadb")
SECOND_HOST = "snakelab-2"
# The services frozen besides SnakeLab (which gets half of the freezes), by weight: MariaDB
# frozen just after a submission's intent holds SnakeLab's insert of the run, the way to a late
# answer, so it gets twice the share.
OTHER_FREEZE_TARGETS = ("mariadb", "mariadb", "toolbroker", "orchestrator")
# The share of kills aimed at a frozen service when one is frozen at that moment.
KILL_FROZEN_SHARE = 0.3
# Deaths of these without a kill are findings: they should wait out an outage in place.
MUST_NOT_DIE = ("toolbroker", "snakelab", SECOND_HOST, "scripted-model")


@dataclass(frozen=True)
class ChaosConfig:
    seed: int = 11
    kills: int = 40
    freezes: int = 20
    freeze_seconds: tuple[float, float] = (1.0, 8.0)
    submission_wait: float = 30.0
    interval: tuple[float, float] = (1.5, 6.5)
    run_seconds: float = 1.5
    stagnant_rounds: int = 2
    recovery_deadline: float = 90.0
    promotion: str = "single"
    golden: str = "spec"  # AX3L_GOLDEN: model lets the golden follow the model of every run
    proposer: str = "tpe"  # the first half's proposer (the second half's is the scripted model)
    hosts: int = 1  # 2: a second SnakeLab host (snakelab-2) on the same database
    recovery_steps: int = 3
    restart_delay: tuple[float, float] = (0.2, 2.0)
    model_delay: float = 0.3

    @classmethod
    def from_env(cls) -> ChaosConfig:
        env = os.environ
        return cls(
            seed=int(env.get("AX3L_CHAOS_SEED", "11")),
            kills=int(env.get("AX3L_CHAOS_KILLS", "40")),
            freezes=int(env.get("AX3L_CHAOS_FREEZES", "20")),
            freeze_seconds=_pair(env.get("AX3L_CHAOS_FREEZE_SECONDS", "1,8")),
            interval=_pair(env.get("AX3L_CHAOS_INTERVAL", "1.5,6.5")),
            run_seconds=float(env.get("AX3L_CHAOS_RUN_SECONDS", "1.5")),
            stagnant_rounds=int(env.get("AX3L_CHAOS_STAGNANT_ROUNDS", "2")),
            recovery_deadline=float(env.get("AX3L_CHAOS_RECOVERY_DEADLINE", "90")),
            promotion=env.get("AX3L_CHAOS_PROMOTION", "single"),
            golden=env.get("AX3L_CHAOS_GOLDEN", "spec"),
            proposer=env.get("AX3L_CHAOS_PROPOSER", "tpe"),
            hosts=int(env.get("AX3L_CHAOS_HOSTS", "1")),
        )

    @property
    def targets(self) -> tuple[str, ...]:
        """What a kill may hit: the services, and the second SnakeLab host when there is one."""
        return (*TARGETS, SECOND_HOST) if self.hosts > 1 else TARGETS


def _pair(text: str) -> tuple[float, float]:
    low, high = (float(x) for x in text.split(","))
    return low, high


@dataclass
class Fault:  # what a kill and a freeze both record
    number: int
    at: float
    target: str
    phase: str
    proposer: str
    steps_before: int


@dataclass
class Kill(Fault):
    frozen: bool = False  # the victim was frozen when killed


@dataclass
class Freeze(Fault):
    seconds: float
    trigger: str  # "random moment", "tool request", "submission intent" or what was not seen
    processes: int  # how many processes were stopped
    killed: bool = False  # killed while frozen


TOOL_REQUEST = "tool request"
INTENT = "submission intent"


@dataclass(frozen=True)
class Planned:
    """One disturbance of the sequence: a kill, or a freeze of ``target``, at a random moment
    or (``at``) at the broker's next tool request or next submission intent."""

    kind: str  # "kill" or "freeze"
    target: str | None = None
    at: str | None = None


def plan(config: ChaosConfig, rng: random.Random) -> list[Planned]:
    """The kills and freezes in a shuffled order. Half of the freezes (rounded up) are
    SnakeLab's, the rest go to MariaDB, the broker and the orchestrator (``OTHER_FREEZE_TARGETS``'
    weights). Half of SnakeLab's and of MariaDB's freezes (rounded up) are timed to a
    submission: MariaDB's at its intent (SnakeLab's insert of the run then waits), SnakeLab's
    alternately at the tool request (the request then never reaches it: a fresh socket's
    handshake needs SnakeLab) and at the intent (it may be caught handling the submit)."""
    snakelab = (config.freezes + 1) // 2
    others = list(OTHER_FREEZE_TARGETS)
    rng.shuffle(others)
    targets = ["snakelab"] * snakelab + [
        others[n % len(others)] for n in range(config.freezes - snakelab)
    ]
    timings = {"snakelab": (TOOL_REQUEST, INTENT), "mariadb": (INTENT,)}
    freezes = []
    for target in dict.fromkeys(targets):
        count = targets.count(target)
        timed = (count + 1) // 2 if target in timings else 0
        at = timings.get(target, ())
        freezes += [
            Planned("freeze", target, at[n % len(at)] if n < timed else None) for n in range(count)
        ]
    sequence = [Planned("kill")] * config.kills + freezes
    rng.shuffle(sequence)
    return sequence


@dataclass
class ChaosReport:
    config: ChaosConfig
    kills: list[Kill] = field(default_factory=list)
    freezes: list[Freeze] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    deaths: list[Death] = field(default_factory=list)
    invariants: list[Invariant] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    oracle: str = "not run"
    mariadb_recovery: list[float] = field(default_factory=list)
    mariadb_unrecovered: int = 0
    mariadb_restart_seconds: list[float] = field(default_factory=list)
    advancing: bool = False
    progress: str = ""
    advance_detail: str = ""
    duration: float = 0.0
    log_dir: str = ""

    def failures(self) -> list[str]:
        problems = [
            f"{i.name}: {len(i.violations)} violation(s)" for i in self.invariants if not i.passed
        ]
        if not self.advancing:
            problems.append(f"loop not advancing after the last disturbance: {self.advance_detail}")
        bad = [d for d in self.deaths if d.service in MUST_NOT_DIE]
        if bad:
            problems.append(
                "died without being killed: "
                + ", ".join(f"{k} {v}x" for k, v in Counter(d.service for d in bad).items())
            )
        failed = [r for r in self.restarts if not r.ok]
        if failed:
            problems.append(
                "restarts that failed: "
                + ", ".join(f"{k} {v}x" for k, v in Counter(r.service for r in failed).items())
            )
        if self.oracle != "passed":
            problems.append(f"history oracle (stack.check_history): {self.oracle.splitlines()[0]}")
        return problems

    def text(self) -> str:
        config = self.config
        lines = [
            f"chaos: seed {config.seed} (AX3L_CHAOS_SEED), {len(self.kills)} kills"
            f" (AX3L_CHAOS_KILLS={config.kills}), {len(self.freezes)} freezes"
            f" (AX3L_CHAOS_FREEZES={config.freezes}), promotion {config.promotion},"
            f" {self.duration:.0f} s; logs in {self.log_dir}",
            "kills survived by victim:  " + _tally(k.target for k in self.kills),
            "kills survived by phase:   " + _tally(k.phase for k in self.kills),
            "kills by proposer: " + _tally(k.proposer for k in self.kills),
            "  victim x phase: " + _tally(f"{k.target}/{k.phase}" for k in self.kills),
            "freezes survived by victim: " + _tally(f.target for f in self.freezes),
            "freezes survived by phase:  " + _tally(f.phase for f in self.freezes),
            "freezes by trigger: " + _tally(f.trigger for f in self.freezes),
            "  victim x phase: " + _tally(f"{f.target}/{f.phase}" for f in self.freezes),
        ]
        if self.freezes:
            seconds = [f.seconds for f in self.freezes]
            lines.append(
                f"  frozen {sum(seconds):.0f} s in all (p50 {chaos.percentile(seconds, 0.5):.1f}"
                f" s, max {max(seconds):.1f} s); kills of a frozen service:"
                f" {sum(1 for k in self.kills if k.frozen)}"
                f" ({_tally(k.target for k in self.kills if k.frozen) or 'none'})"
            )
        lines.append(
            f"restarts: {len(self.restarts)} ({sum(1 for r in self.restarts if not r.ok)} failed)"
        )
        for restart in (r for r in self.restarts if not r.ok):
            lines.append(f"  failed restart of {restart.service}: {restart.error.strip()[-300:]}")
        deaths = Counter(d.service for d in self.deaths)
        lines.append(
            "died without being killed: "
            + (", ".join(f"{k} {v}x" for k, v in sorted(deaths.items())) or "none")
        )
        shown: Counter[str] = Counter()
        for death in self.deaths:
            shown[death.service] += 1
            if shown[death.service] <= 3:
                tail = death.tail.strip().splitlines()[-3:]
                lines.append(
                    f"  {death.service} exit {death.returncode}: " + " | ".join(tail)[-400:]
                )
        if self.mariadb_restart_seconds:
            lines.append(f"MariaDB down (kill -> back up): {_spread(self.mariadb_restart_seconds)}")
        if self.mariadb_recovery:
            lines.append(
                f"recovery after a MariaDB restart (back up -> next completed step,"
                f" {len(self.mariadb_recovery)} measured): {_spread(self.mariadb_recovery)}, max"
                f" {max(self.mariadb_recovery):.1f} s"
            )
        lines += [
            f"  not recovered before the next MariaDB kill or the end: {self.mariadb_unrecovered}",
            f"progress during the chaos: {self.progress}",
            f"after the last disturbance: {self.advance_detail}",
            "history: " + json.dumps(self.counts, default=str),
            "invariants:",
        ]
        for invariant in self.invariants:
            verdict = "ok  " if invariant.passed else "FAIL"
            lines.append(
                f"  {verdict} {invariant.name}: {invariant.checked} checked,"
                f" {len(invariant.violations)} violated"
            )
            for violation in invariant.violations[:8]:
                lines.append(f"         - {violation}")
            if len(invariant.violations) > 8:
                lines.append(f"         ... {len(invariant.violations) - 8} more")
        lines.append(f"  history oracle (stack.check_history): {self.oracle}")
        return "\n".join(lines)


def _clock() -> str:
    """The wall-clock time, as the services' logs write it (to find a disturbance there)."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"


def _spread(values: list[float]) -> str:
    """``p50 1.2 s, p95 3.4 s``: the median and the 95th percentile of ``values``."""
    return f"p50 {chaos.percentile(values, 0.5):.1f} s, p95 {chaos.percentile(values, 0.95):.1f} s"


def _tally(values: Any) -> str:
    """``a 3, b 1``: how often each value occurs, by name."""
    return ", ".join(f"{k} {v}" for k, v in sorted(Counter(values).items()))


# make run's restart policy with the chaos tier's timings; it never gives up (deaths are findings).
POLICY = RestartPolicy(backoff_max=8.0, quick_crash_seconds=30.0, give_up_after=None)
# The caller's own stack settings, never inherited: the chaos stack's are its own.
FOREIGN = ("AX3L_", "SNAKELAB_", "DB_")
STOP_ORDER = ("orchestrator", "toolbroker", "scripted-model", "snakelab", SECOND_HOST)


class ChaosStack:
    """MariaDB, SnakeLab, the broker, the scripted model and the orchestrator, supervised."""

    def __init__(self, repo: Path, log_dir: Path, config: ChaosConfig):
        self.repo = repo
        self.log_dir = log_dir
        self.config = config
        self.mariadb = PrivateMariaDB(repo)
        self.supervisor = Supervisor([])
        self.freezer = chaos.Freezer()
        self.proposer = config.proposer
        names = ["snakelab", "snakelab_events", "snakelab2", "snakelab2_events"]
        names += ["toolbroker", "orchestrator", "model", "zmq"]
        self.ports = {name: free_port() for name in names}
        self.databases: TestDatabases | None = None

    @property
    def processes(self) -> dict[str, Child]:
        return self.supervisor.services

    @property
    def status_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['orchestrator']}/api/status"

    def _stack_env(self) -> dict[str, str]:
        """What make run's stack_env would hold for this stack: the database, ports, endpoints."""
        assert self.databases is not None
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(FOREIGN)},
            **self.databases.env(),
            "SNAKELAB_PORT": str(self.ports["snakelab"]),
            "SNAKELAB_EVENTS_PORT": str(self.ports["snakelab_events"]),
            "AX3L_SNAKELAB_ENDPOINT": f"tcp://127.0.0.1:{self.ports['snakelab']}",
            "AX3L_ZMQ_ENDPOINT": f"tcp://127.0.0.1:{self.ports['zmq']}",
            "AX3L_TOOLBROKER_PORT": str(self.ports["toolbroker"]),
            "AX3L_ORCHESTRATOR_PORT": str(self.ports["orchestrator"]),
        }
        if self.config.hosts > 1:
            second = f"tcp://127.0.0.1:{self.ports['snakelab2']}"
            env["AX3L_SNAKELAB_ENDPOINTS"] = f"{env['AX3L_SNAKELAB_ENDPOINT']},{second}"
        return env

    def _overrides(self, name: str) -> dict[str, str]:
        """The chaos tier's own settings for ``name`` (the orchestrator's, as of its start)."""
        if name in ("snakelab", SECOND_HOST):
            named = {"SNAKELAB_HOST_ID": f"h{int(name == SECOND_HOST)}"}
            return {
                "SNAKELAB_TRAINER": "surrogate",
                "SNAKELAB_SURROGATE_SECONDS": str(self.config.run_seconds),
                "SNAKELAB_LOG_LEVEL": "INFO",
                **(named if self.config.hosts > 1 else {}),
            }
        if name != "orchestrator":
            return {}
        env = {
            "AX3L_POLL_INTERVAL": "0.2",
            "AX3L_RETRY_BACKOFF_MAX": "2",
            "AX3L_LLM_TIMEOUT": "20",
            "AX3L_MCP_CALL_TIMEOUT": "20",
            "AX3L_SEED_STAGNANT_ROUNDS": str(self.config.stagnant_rounds),
            "AX3L_PROPOSER": self.proposer,
            "AX3L_PROMOTION": self.config.promotion,
            "AX3L_GOLDEN": self.config.golden,
        }
        if self.proposer == "llm":
            env["AX3L_LLM_URL"] = f"http://127.0.0.1:{self.ports['model']}"
        return env

    def _child(self, name: str, command: list[str], env: Callable[[], dict[str, str]]) -> Child:
        log = self.log_dir / f"{name}.log"

        def launch() -> ManagedProcess:
            return ManagedProcess(
                name, command, env(), log, new_session=True, stdin=subprocess.DEVNULL
            )

        return Child(name, launch, log_path=log, rng=random.Random(self.rng.random()))

    def _service_child(self, name: str) -> Child:
        """``name`` as the stack's specification runs it; ``SECOND_HOST`` is another reference
        SnakeLab on the same database, on ports of its own."""
        ports: dict[str, str] = {}
        kind = name
        if name == SECOND_HOST:
            kind = "snakelab"
            ports["SNAKELAB_PORT"] = str(self.ports["snakelab2"])
            ports["SNAKELAB_EVENTS_PORT"] = str(self.ports["snakelab2_events"])
        service = spec.service(kind, {**self._stack_env(), **ports})
        return self._child(
            name,
            service.argv(sys.executable),
            lambda: service.environment({**self._stack_env(), **ports}, self._overrides(name)),
        )

    def start(self) -> None:
        self.mariadb.start()
        self.databases = TestDatabases.of_server(self.mariadb.settings())
        ensure_schema(self.databases.settings())
        self.rng = random.Random(self.config.seed + 1)
        script = self.log_dir / "model-script.json"
        then = {"random_call": random_call_ranges(), "delay": self.config.model_delay}
        script.write_text(json.dumps({"then": then}))
        model = [
            *(sys.executable, "-m", "ax3l.testing.scripted_llm"),
            *("--port", str(self.ports["model"]), "--script", str(script)),
            *("--seed", str(self.config.seed)),
        ]
        children = [
            self._service_child("snakelab"),
            *([self._service_child(SECOND_HOST)] if self.config.hosts > 1 else []),
            self._service_child("toolbroker"),
            self._child("scripted-model", model, lambda: spec.process_env(os.environ)),
            self._service_child("orchestrator"),
        ]
        mariadb = Child("mariadb", self.mariadb.start, rng=random.Random(self.rng.random()))
        policy = replace(POLICY, kill_delay=self.config.restart_delay)
        self.supervisor = Supervisor([*children, mariadb], policy)
        self.supervisor.adopt(mariadb, self.mariadb)
        for child in children:
            self.supervisor.launch(child)
        self.supervisor.watch_in_threads()

    def stop_services(self) -> None:
        self.freezer.resume_all()
        self.supervisor.stop_watching()
        for name in STOP_ORDER:
            if name in self.processes:
                self.supervisor.stop_child(self.processes[name])
        if not self.mariadb.alive():
            self.mariadb.start()

    def destroy(self) -> None:
        self.freezer.resume_all()
        self.supervisor.stop_watching()
        for child in self.processes.values():
            if child.proc is not None and child.name != "mariadb":
                child.proc.kill_tree()
        self.mariadb.destroy()


def run_chaos(repo: Path, log_dir: Path, config: ChaosConfig | None = None) -> ChaosReport:
    """Start the stack, kill, freeze and restart at random, check the databases; never raises
    for a finding (the report lists them), only for a harness that failed (its error then
    names the seed)."""
    config = config or ChaosConfig.from_env()
    log_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"chaos: seed {config.seed} (AX3L_CHAOS_SEED), {config.kills} kills,"
        f" {config.freezes} freezes, logs in {log_dir}",
        flush=True,
    )
    report = ChaosReport(config, log_dir=str(log_dir))
    began = time.monotonic()
    stack = ChaosStack(repo, log_dir, config)
    monitor: ProgressMonitor | None = None
    try:
        stack.start()
        assert stack.databases is not None
        monitor = ProgressMonitor(stack.databases).start()
        if not chaos.came_true(lambda: monitor.latest() >= 1, 120):
            raise RuntimeError(
                "the stack did not complete a first step within 120 s:\n"
                + stack.processes["orchestrator"].output_since_start(30)
            )
        Driver(stack, monitor, config, report).run()
        _await_progress(stack, monitor, config, report)
    except Exception as exc:
        exc.add_note(f"chaos: seed {config.seed} (AX3L_CHAOS_SEED); logs in {log_dir}")
        raise
    finally:
        stack.freezer.resume_all()  # nothing stays stopped, whatever failed
        report.restarts = list(stack.supervisor.restarts)
        report.deaths = list(stack.supervisor.deaths)
        try:
            stack.stop_services()
            if monitor is not None:
                monitor.stop()
                _recovery_times(monitor, report)
                report.progress = _progress(monitor, report)
            if stack.databases is not None:
                _check(stack.databases, log_dir, report)
        finally:
            stack.destroy()
            report.duration = time.monotonic() - began
    return report


class Driver:
    """Runs the planned sequence of kills and freezes against a started stack."""

    def __init__(
        self, stack: ChaosStack, monitor: ProgressMonitor, config: ChaosConfig, report: ChaosReport
    ):
        self.stack = stack
        self.monitor = monitor
        self.config = config
        self.report = report
        self.rng = random.Random(config.seed)
        self.services = stack.supervisor.services
        assert stack.databases is not None
        self.probe = chaos.Probe(stack.databases)
        self.kills_done = 0
        self.frozen_phase = "orchestrator frozen"  # the loop's phase when it was frozen
        self.status_pid: int | None = None  # the orchestrator that last answered the status

    def up(self) -> list[str]:
        return [
            t
            for t in self.config.targets
            if self.services[t].alive() and not self.services[t].restarting
        ]

    def phase(self) -> tuple[str, str]:
        """What the loop is doing (the status API's phase), and its proposer. The status reads
        the database, so it does not answer while MariaDB is frozen or down; the label then
        says why the phase is unknown."""
        services, freezer = self.services, self.stack.freezer
        if freezer.is_frozen("orchestrator"):
            return self.frozen_phase, self.stack.proposer
        code, status = spec.http_get(self.stack.status_url, timeout=1.0)
        orchestrator = self.stack.processes["orchestrator"]
        if code == 200 and isinstance(status, dict):
            self.status_pid = orchestrator.pid()
            return str(status.get("phase")), str(status.get("proposer"))
        if not services["orchestrator"].alive():
            return "orchestrator down", self.stack.proposer
        if freezer.is_frozen("mariadb"):
            return "unknown (MariaDB frozen)", self.stack.proposer
        if not services["mariadb"].alive() or services["mariadb"].restarting:
            return "unknown (MariaDB down)", self.stack.proposer
        if orchestrator.pid() != self.status_pid:
            return "orchestrator starting (no status yet)", self.stack.proposer
        return "unknown (no status answer)", self.stack.proposer

    def run(self) -> None:
        sequence = plan(self.config, self.rng)
        total = len(sequence)
        try:
            for number, planned in enumerate(sequence, start=1):
                time.sleep(self.rng.uniform(*self.config.interval))
                if planned.kind == "kill":
                    self.kill(number, total)
                else:
                    self.freeze(number, total, planned)
            # The last freeze ends by itself (at most its length) before recovery is measured.
            self.stack.freezer.wait_thawed(self.config.freeze_seconds[1] + 5)
        finally:
            self.stack.freezer.resume_all()
            self.probe.close()

    def _some_up(self) -> list[str]:
        if not chaos.came_true(lambda: bool(self.up()), 60):
            raise RuntimeError("no service came back within 60 s")
        return self.up()

    def kill(self, number: int, total: int) -> None:
        rng, freezer = self.rng, self.stack.freezer
        target = rng.choice(self.config.targets)
        # Drawn whether or not a service is frozen, so the seed's later draws stay the same.
        aim, which = rng.random(), rng.random()
        frozen = sorted(t for t in freezer.frozen() if t in self.config.targets)
        if frozen and aim < KILL_FROZEN_SHARE:
            target = frozen[int(which * len(frozen))]  # a frozen service dies like a running one
        switch = self.kills_done == self.config.kills // 2
        if switch:
            # The second half runs the scripted model; a restart of the loop switches it.
            self.stack.proposer = "llm"
            target = "orchestrator"
        up = self.up()
        if target not in up:
            up = self._some_up()
            target = target if switch and target in up else rng.choice(up)
        phase, proposer = self.phase()
        was_frozen = freezer.is_frozen(target)
        kill = Kill(
            number, time.monotonic(), target, phase, proposer, self.monitor.latest(), was_frozen
        )
        self.report.kills.append(kill)
        self.kills_done += 1
        print(
            f"chaos: {_clock()} {number:2d}/{total} kill   {target:12s} phase={phase}"
            f"{' (frozen)' if was_frozen else ''} steps={kill.steps_before}",
            flush=True,
        )
        frozen_by = next((f for f in reversed(self.report.freezes) if f.target == target), None)
        if was_frozen and frozen_by is not None:
            frozen_by.killed = True
        self.services[target].kill9()

    def freeze(self, number: int, total: int, planned: Planned) -> None:
        target = planned.target
        assert target is not None
        freezer = self.stack.freezer
        # One freeze of a service at a time; it must be up (it restarts within seconds).
        ready = chaos.came_true(lambda: target in self.up() and not freezer.is_frozen(target), 60)
        if not ready:
            raise RuntimeError(f"{target} was not up (and unfrozen) within 60 s to freeze it")
        seconds = self.rng.uniform(*self.config.freeze_seconds)
        if planned.at is not None:
            trigger = self.probe.wait_for_submission(
                self.config.submission_wait, intent=planned.at == INTENT
            )
            timed = trigger == planned.at
            if not timed:
                phase, proposer = self.phase()
        else:
            trigger, timed = "random moment", False
            phase, proposer = self.phase()  # read first: it may be the orchestrator frozen next
        at = time.monotonic()
        steps = self.monitor.latest()
        stopped = 0
        if target in self.up():
            stopped = freezer.freeze(target, self.services[target].pids(), seconds)
        if timed:
            phase, proposer = "submitting", self.stack.proposer
        if target == "orchestrator":
            self.frozen_phase = phase
        freeze = Freeze(number, at, target, phase, proposer, steps, seconds, trigger, stopped)
        print(
            f"chaos: {_clock()} {number:2d}/{total} freeze {target:12s} phase={phase}"
            f" {seconds:.1f} s ({trigger}, {stopped} processes) steps={steps}",
            flush=True,
        )
        if stopped:
            self.report.freezes.append(freeze)
        else:
            print(f"chaos: {target} went down before the freeze; not counted", flush=True)


def _await_progress(
    stack: ChaosStack, monitor: ProgressMonitor, config: ChaosConfig, report: ChaosReport
) -> None:
    last = time.monotonic()
    if not chaos.came_true(stack.supervisor.all_up, 60):
        down = [n for n, s in stack.supervisor.services.items() if not s.alive()]
        report.advance_detail = f"services still down 60 s after the last disturbance: {down}"
        return
    up_after = time.monotonic() - last
    start = monitor.latest()
    goal = start + config.recovery_steps
    reached = chaos.came_true(lambda: monitor.latest() >= goal, config.recovery_deadline)
    waited = time.monotonic() - last
    report.advancing = reached
    report.advance_detail = (
        f"all services up (and none frozen) {up_after:.1f} s after the last disturbance; "
        f"{monitor.latest() - start} new completed steps (wanted {config.recovery_steps})"
        f" within {waited:.1f} s (deadline {config.recovery_deadline:g} s after all were up)"
    )
    if not reached:
        status = spec.http_get(stack.status_url, timeout=0.5)[1]
        report.advance_detail += f"; orchestrator status: {json.dumps(status)[:600]}"


def _recovery_times(monitor: ProgressMonitor, report: ChaosReport) -> None:
    db_kills = [k for k in report.kills if k.target == "mariadb"]
    db_restarts = [r for r in report.restarts if r.service == "mariadb" and r.ok and r.killed]
    for index, kill in enumerate(db_kills):
        restart = next((r for r in db_restarts if r.died_at >= kill.at - 0.5), None)
        if restart is None:
            report.mariadb_unrecovered += 1
            continue
        report.mariadb_restart_seconds.append(restart.restarted_at - kill.at)
        before = max((c for t, c in monitor.samples if t <= kill.at), default=0)
        recovered = monitor.first_above(restart.restarted_at, before)
        next_kill = db_kills[index + 1].at if index + 1 < len(db_kills) else float("inf")
        if recovered is None or recovered > next_kill:
            report.mariadb_unrecovered += 1
        else:
            report.mariadb_recovery.append(recovered - restart.restarted_at)


def _progress(monitor: ProgressMonitor, report: ChaosReport) -> str:
    """Steps completed during the chaos, and the longest time without a new one."""
    disturbances = sorted([*report.kills, *report.freezes], key=lambda d: d.at)
    if not disturbances or not monitor.samples:
        return "no disturbances"
    first, last = disturbances[0], disturbances[-1]
    during = [(t, c) for t, c in monitor.samples if first.at <= t <= last.at]
    stall, stall_from, since, value = 0.0, first.at, first.at, first.steps_before
    for at, count in during:
        if count > value:
            since, value = at, count
        elif at - since > stall:
            stall, stall_from = at - since, since
    if last.at - since > stall:
        stall, stall_from = last.at - since, since
    after = next((d for d in reversed(disturbances) if d.at <= stall_from), None)
    where = (
        f"from {'kill' if isinstance(after, Kill) else 'freeze'} {after.number} ({after.target})"
        if after
        else "from the start"
    )
    return (
        f"{first.steps_before} steps before the first disturbance, {last.steps_before} at the"
        f" last ({last.steps_before - first.steps_before} during {last.at - first.at:.0f} s of"
        f" chaos); longest time without a new step {stall:.0f} s ({where})"
    )


def _check(databases: TestDatabases, log_dir: Path, report: ChaosReport) -> None:
    with chaos.admin_connection(databases) as conn:
        report.invariants, report.counts = check_invariants(conn, databases.snakelab_db)
    from ax3l.testing.stack import Stack, check_history

    stack = Stack(databases, log_dir)
    try:
        check_history(stack)
        report.oracle = "passed"
    except AssertionError as exc:
        report.oracle = f"FAILED: {str(exc)[:600]}"
    except Exception as exc:  # the oracle itself tripped over this history
        report.oracle = f"ERROR: {type(exc).__name__}: {str(exc)[:600]}"
    finally:
        stack.close()


def main() -> int:
    repo = Path(__file__).resolve().parents[4]
    log_dir = Path(os.environ.get("AX3L_TEST_OUTPUT", repo / "test-output")) / "chaos"
    report = run_chaos(repo, log_dir)
    print(report.text())
    problems = report.failures()
    for problem in problems:
        print(f"chaos: seed {report.config.seed}: FAILED {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
