"""The chaos scenario of issue 11: the whole stack, SIGKILLed at random moments, then checked.

    uv run python -m ax3l.testing.chaos_run          # the same as `make test-chaos`

Settings (environment): ``AX3L_CHAOS_SEED`` (default 11), ``AX3L_CHAOS_KILLS`` (52),
``AX3L_CHAOS_INTERVAL`` ("2,8": seconds between kills, uniform), ``AX3L_CHAOS_RUN_SECONDS``
(1.5: surrogate run time), ``AX3L_CHAOS_STAGNANT_ROUNDS`` (2, so seed rotations happen),
``AX3L_CHAOS_RECOVERY_DEADLINE`` (90 s for 3 new steps after the last kill). The first half of
the kills runs the ``tpe`` proposer, the second half the scripted model (``llm``).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ax3l.shared.db.cli import ensure_schema
from ax3l.shared.waiting import WaitTimeout, wait_until
from ax3l.testing import chaos
from ax3l.testing.chaos import (
    Invariant,
    PrivateMariaDB,
    ProgressMonitor,
    Restart,
    ServiceProcess,
    Supervised,
    Supervisor,
)
from ax3l.testing.plugin import TestDatabases, free_port
from ax3l.testing.scripted_llm import random_call_ranges

TARGETS = ("orchestrator", "toolbroker", "snakelab", "mariadb")
# Deaths of these without a kill are findings: they should wait out an outage in place.
MUST_NOT_DIE = ("toolbroker", "snakelab", "scripted-model")


@dataclass(frozen=True)
class ChaosConfig:
    seed: int = 11
    kills: int = 52
    interval: tuple[float, float] = (2.0, 8.0)
    run_seconds: float = 1.5
    stagnant_rounds: int = 2
    recovery_deadline: float = 90.0
    recovery_steps: int = 3
    restart_delay: tuple[float, float] = (0.2, 2.0)
    model_delay: float = 0.3

    @classmethod
    def from_env(cls) -> ChaosConfig:
        env = os.environ
        interval = tuple(float(x) for x in env.get("AX3L_CHAOS_INTERVAL", "2,8").split(","))
        return cls(
            seed=int(env.get("AX3L_CHAOS_SEED", "11")),
            kills=int(env.get("AX3L_CHAOS_KILLS", "52")),
            interval=(interval[0], interval[1]),
            run_seconds=float(env.get("AX3L_CHAOS_RUN_SECONDS", "1.5")),
            stagnant_rounds=int(env.get("AX3L_CHAOS_STAGNANT_ROUNDS", "2")),
            recovery_deadline=float(env.get("AX3L_CHAOS_RECOVERY_DEADLINE", "90")),
        )


@dataclass
class Kill:
    number: int
    at: float
    target: str
    phase: str
    proposer: str
    steps_before: int


@dataclass
class ChaosReport:
    config: ChaosConfig
    kills: list[Kill] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    deaths: list[chaos.Death] = field(default_factory=list)
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
            problems.append(f"loop not advancing after the last kill: {self.advance_detail}")
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
        lines = [
            f"chaos: seed {self.config.seed} (AX3L_CHAOS_SEED), {len(self.kills)} kills"
            f" (AX3L_CHAOS_KILLS), {self.duration:.0f} s; logs in {self.log_dir}",
            "kills by target:  "
            + ", ".join(
                f"{k} {v}" for k, v in sorted(Counter(k.target for k in self.kills).items())
            ),
            "kills by phase:   "
            + ", ".join(
                f"{k} {v}" for k, v in sorted(Counter(k.phase for k in self.kills).items())
            ),
            "kills by proposer: "
            + ", ".join(
                f"{k} {v}" for k, v in sorted(Counter(k.proposer for k in self.kills).items())
            ),
        ]
        table = Counter((k.target, k.phase) for k in self.kills)
        lines.append(
            "  target x phase: " + ", ".join(f"{t}/{p} {n}" for (t, p), n in sorted(table.items()))
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
            lines.append(
                "MariaDB down (kill -> back up): p50 "
                f"{chaos.percentile(self.mariadb_restart_seconds, 0.5):.1f} s, p95"
                f" {chaos.percentile(self.mariadb_restart_seconds, 0.95):.1f} s"
            )
        if self.mariadb_recovery:
            lines.append(
                f"recovery after a MariaDB restart (back up -> next completed step,"
                f" {len(self.mariadb_recovery)} measured): p50"
                f" {chaos.percentile(self.mariadb_recovery, 0.5):.1f} s, p95"
                f" {chaos.percentile(self.mariadb_recovery, 0.95):.1f} s, max"
                f" {max(self.mariadb_recovery):.1f} s"
            )
        lines.append(
            f"  not recovered before the next MariaDB kill or the end: {self.mariadb_unrecovered}"
        )
        lines.append(f"progress during the chaos: {self.progress}")
        lines.append(f"after the last kill: {self.advance_detail}")
        lines.append("history: " + json.dumps(self.counts, default=str))
        lines.append("invariants:")
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


def _clean_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AX3L_", "SNAKELAB_", "DB_"))}


class ChaosStack:
    """MariaDB, SnakeLab, the broker, the scripted model and the orchestrator, supervised."""

    def __init__(self, repo: Path, log_dir: Path, config: ChaosConfig):
        self.repo = repo
        self.log_dir = log_dir
        self.config = config
        self.mariadb = PrivateMariaDB(repo)
        self.supervisor = Supervisor()
        self.proposer = "tpe"
        self.ports = {
            "snakelab": free_port(),
            "snakelab_events": free_port(),
            "toolbroker": free_port(),
            "orchestrator": free_port(),
            "model": free_port(),
            "zmq": free_port(),
        }
        self.processes: dict[str, ServiceProcess] = {}
        self.databases: TestDatabases | None = None

    @property
    def status_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['orchestrator']}/api/status"

    def _db_env(self) -> dict[str, str]:
        assert self.databases is not None
        return self.databases.env()

    def _process(self, name: str, command: list[str], env: dict[str, str]) -> ServiceProcess:
        proc = ServiceProcess(name, command, env, self.log_dir / f"{name}.log")
        self.processes[name] = proc
        return proc

    def _orchestrator_env(self) -> dict[str, str]:
        env = {
            **_clean_environ(),
            **self._db_env(),
            "AX3L_ZMQ_ENDPOINT": f"tcp://127.0.0.1:{self.ports['zmq']}",
            "AX3L_SNAKELAB_ENDPOINT": f"tcp://127.0.0.1:{self.ports['snakelab']}",
            "AX3L_ORCHESTRATOR_PORT": str(self.ports["orchestrator"]),
            "AX3L_POLL_INTERVAL": "0.2",
            "AX3L_RETRY_BACKOFF_MAX": "2",
            "AX3L_LLM_TIMEOUT": "20",
            "AX3L_MCP_CALL_TIMEOUT": "20",
            "AX3L_SEED_STAGNANT_ROUNDS": str(self.config.stagnant_rounds),
            "AX3L_PROPOSER": self.proposer,
        }
        if self.proposer == "llm":
            env["AX3L_LLM_URL"] = f"http://127.0.0.1:{self.ports['model']}"
        return env

    def start(self) -> None:
        self.mariadb.start()
        self.databases = self.mariadb.databases()
        ensure_schema(self.databases.settings())
        rng = random.Random(self.config.seed + 1)
        base = {**_clean_environ(), **self._db_env()}
        snakelab = self._process(
            "snakelab",
            chaos.python_module(
                "snakelab",
                "--address",
                "127.0.0.1",
                "--port",
                str(self.ports["snakelab"]),
                "--events-port",
                str(self.ports["snakelab_events"]),
            ),
            {
                **base,
                "SNAKELAB_TRAINER": "surrogate",
                "SNAKELAB_SURROGATE_SECONDS": str(self.config.run_seconds),
                "SNAKELAB_LOG_LEVEL": "INFO",
            },
        )
        broker = self._process(
            "toolbroker",
            chaos.python_module(
                "ax3l.toolbroker", "--zmq-endpoint", f"tcp://127.0.0.1:{self.ports['zmq']}"
            ),
            {
                **base,
                "AX3L_SNAKELAB_ENDPOINT": f"tcp://127.0.0.1:{self.ports['snakelab']}",
                "AX3L_TOOLBROKER_PORT": str(self.ports["toolbroker"]),
            },
        )
        script = self.log_dir / "model-script.json"
        script.write_text(
            json.dumps(
                {"then": {"random_call": random_call_ranges(), "delay": self.config.model_delay}}
            )
        )
        model = self._process(
            "scripted-model",
            chaos.python_module(
                "ax3l.testing.scripted_llm",
                "--port",
                str(self.ports["model"]),
                "--script",
                str(script),
                "--seed",
                str(self.config.seed),
            ),
            _clean_environ(),
        )
        orchestrator = self._process("orchestrator", chaos.python_module("ax3l.orchestrator"), {})

        def spawn_orchestrator() -> None:
            orchestrator.env = self._orchestrator_env()
            orchestrator.spawn()

        for proc, spawn in (
            (snakelab, snakelab.spawn),
            (broker, broker.spawn),
            (model, model.spawn),
            (orchestrator, spawn_orchestrator),
        ):
            spawn()
            self.supervisor.add(
                Supervised(
                    proc.name,
                    spawn,
                    proc.alive,
                    proc.kill9,
                    lambda proc=proc: (proc.returncode(), proc.output_since_start()),
                    random.Random(rng.random()),
                    self.config.restart_delay,
                )
            )
        error_log = self.mariadb.run_dir / "mariadb" / "error.log"
        self.supervisor.add(
            Supervised(
                "mariadb",
                self.mariadb.start,
                self.mariadb.alive,
                self.mariadb.kill9,
                lambda: (None, _tail(error_log)),
                random.Random(rng.random()),
                self.config.restart_delay,
            )
        )
        self.supervisor.start()

    def stop_services(self) -> None:
        self.supervisor.stop()
        for name in ("orchestrator", "toolbroker", "scripted-model", "snakelab"):
            if name in self.processes:
                self.processes[name].stop()
        if not self.mariadb.alive():
            self.mariadb.start()

    def destroy(self) -> None:
        self.supervisor.stop()
        for proc in self.processes.values():
            proc.kill9()
        self.mariadb.destroy()


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _wait(condition: Any, timeout: float) -> bool:
    """Whether ``condition`` came true within ``timeout`` (if not, a finding, not an error)."""
    try:
        wait_until(condition, timeout, interval=0.1)
    except WaitTimeout:
        return False
    return True


def run_chaos(repo: Path, log_dir: Path, config: ChaosConfig | None = None) -> ChaosReport:
    """Start the stack, kill and restart at random, check the databases; never raises for a
    finding (the report lists them), only for a harness that could not start."""
    config = config or ChaosConfig.from_env()
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"chaos: seed {config.seed}, {config.kills} kills, logs in {log_dir}", flush=True)
    report = ChaosReport(config, log_dir=str(log_dir))
    began = time.monotonic()
    stack = ChaosStack(repo, log_dir, config)
    monitor: ProgressMonitor | None = None
    try:
        stack.start()
        assert stack.databases is not None
        monitor = ProgressMonitor(stack.databases).start()
        if not _wait(lambda: monitor.latest() >= 1, 120):
            raise RuntimeError(
                "the stack did not complete a first step within 120 s:\n"
                + stack.processes["orchestrator"].output_since_start(30)
            )
        _drive(stack, monitor, config, report)
        _await_progress(stack, monitor, config, report)
    finally:
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


def _drive(
    stack: ChaosStack, monitor: ProgressMonitor, config: ChaosConfig, report: ChaosReport
) -> None:
    rng = random.Random(config.seed)
    services = stack.supervisor.services
    switch_at = config.kills // 2
    for number in range(config.kills):
        time.sleep(rng.uniform(*config.interval))
        target = rng.choice(TARGETS)
        if number == switch_at:
            # The second half runs the scripted model; a restart of the loop switches it.
            stack.proposer = "llm"
            target = "orchestrator"
        up = [t for t in TARGETS if services[t].alive() and not services[t].restarting]
        if target not in up:
            if not _wait(lambda: bool([t for t in TARGETS if services[t].alive()]), 60):
                raise RuntimeError("no service came back within 60 s")
            up = [t for t in TARGETS if services[t].alive() and not services[t].restarting] or [
                t for t in TARGETS if services[t].alive()
            ]
            target = target if number == switch_at and target in up else rng.choice(up)
        status = chaos.get_status(stack.status_url, timeout=1.0)
        phase = (
            str(status.get("phase"))
            if status
            else (
                "orchestrator down"
                if not services["orchestrator"].alive()
                else "orchestrator starting (no status yet)"
            )
        )
        proposer = str(status.get("proposer")) if status else stack.proposer
        kill = Kill(number + 1, time.monotonic(), target, phase, proposer, monitor.latest())
        report.kills.append(kill)
        print(
            f"chaos: kill {kill.number:2d}/{config.kills} {target:12s} phase={phase}"
            f" steps={kill.steps_before}",
            flush=True,
        )
        services[target].kill9()


def _await_progress(
    stack: ChaosStack, monitor: ProgressMonitor, config: ChaosConfig, report: ChaosReport
) -> None:
    last_kill = time.monotonic()
    if not _wait(stack.supervisor.all_up, 60):
        down = [n for n, s in stack.supervisor.services.items() if not s.alive()]
        report.advance_detail = f"services still down 60 s after the last kill: {down}"
        return
    up_after = time.monotonic() - last_kill
    start = monitor.latest()
    goal = start + config.recovery_steps
    reached = _wait(lambda: monitor.latest() >= goal, config.recovery_deadline)
    waited = time.monotonic() - last_kill
    report.advancing = reached
    report.advance_detail = (
        f"all services up {up_after:.1f} s after the last kill; "
        f"{monitor.latest() - start} new completed steps (wanted {config.recovery_steps})"
        f" within {waited:.1f} s (deadline {config.recovery_deadline:g} s after all were up)"
    )
    if not reached:
        status = chaos.get_status(stack.status_url)
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
    if not report.kills or not monitor.samples:
        return "no kills"
    first, last = report.kills[0], report.kills[-1]
    during = [(t, c) for t, c in monitor.samples if first.at <= t <= last.at]
    stall, stall_from, since, value = 0.0, first.at, first.at, first.steps_before
    for at, count in during:
        if count > value:
            since, value = at, count
        elif at - since > stall:
            stall, stall_from = at - since, since
    if last.at - since > stall:
        stall, stall_from = last.at - since, since
    after_kill = next((k.number for k in reversed(report.kills) if k.at <= stall_from), 0)
    return (
        f"{first.steps_before} steps before the first kill, {last.steps_before} at the last"
        f" ({last.steps_before - first.steps_before} during {last.at - first.at:.0f} s of kills);"
        f" longest time without a new step {stall:.0f} s (from kill {after_kill})"
    )


def _check(databases: TestDatabases, log_dir: Path, report: ChaosReport) -> None:
    with chaos.admin_connection(databases) as conn:
        report.invariants, report.counts = chaos.check_invariants(conn, databases.snakelab_db)
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
    repo = Path(__file__).resolve().parents[5]
    log_dir = Path(os.environ.get("AX3L_TEST_OUTPUT", repo / "test-output")) / "chaos"
    report = run_chaos(repo, log_dir)
    print(report.text())
    problems = report.failures()
    for problem in problems:
        print(f"chaos: FAILED {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
