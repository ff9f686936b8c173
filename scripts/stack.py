"""Run the whole Ax3l stack as local, supervised processes: ``make run/start/stop/status``.

The private MariaDB is started by ``scripts/mariadb.sh`` (the Makefile does it first); this
script waits for it (bounded), creates the schema and hands the services to a supervisor that
starts, in order, the reference SnakeLab, the toolbroker, the orchestrator and the report
server, and restarts any of them that exits, with backoff, the way compose's
``restart: unless-stopped`` does. It gives up (and stops the stack) only after a service
crashed ``AX3L_STACK_RESTART_LIMIT`` times in a row within seconds of starting.

``run`` supervises in the foreground (Ctrl-C stops everything); ``start`` leaves the
supervisor in the background (pid in ``<run dir>/stack/supervisor.pid``, log in
``<run dir>/logs/stack.log``); ``stop`` ends it and its children; ``status`` prints each
service. ``services(env)`` defines each process of this stack, in start order: its command, its
health check and the settings it is given. Every process gets only the settings it reads, and
the private MariaDB's admin login never leaves ``db.env``. ``tests/test_compose.py`` checks
compose.yaml's environments against it. The tests' stack (``ax3l.testing.stack``) and
``ax3l-compare``'s repeats (``ax3l.compare.processes``) define their processes themselves.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ax3l.shared.env_files import read_env_file, setting_names
from ax3l.shared.processes import ManagedProcess, end_group, process_alive
from ax3l.shared.waiting import WaitTimeout, wait_until

REPO = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("AX3L_RUN_DIR", REPO / ".run"))
PID_DIR = RUN_DIR / "stack"
LOG_DIR = RUN_DIR / "logs"
SUPERVISOR_PID = PID_DIR / "supervisor.pid"
SUPERVISOR_LOCK = PID_DIR / "supervisor.lock"
STATE_FILE = PID_DIR / "state.json"
STACK_LOG = LOG_DIR / "stack.log"

# The restart policy: compose's (Docker's) backoff doubles from a short delay up to a cap and
# starts over once a process has run for 10 s; we also give up after repeated quick crashes.
BACKOFF_START = 0.5
QUICK_CRASH_SECONDS = 10.0
HEALTH_TIMEOUT = 60.0
START_TIMEOUT = 300.0
LOCK_BUSY = 3  # the supervisor's exit code when another one holds the lock

# What any Python process needs from the environment; nothing else is inherited.
PROCESS_KEYS = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR",
    "PYTHONPATH", "VIRTUAL_ENV",
)  # fmt: skip
PROCESS_PREFIXES = ("LC_",)
# Never handed to any process: the private MariaDB's admin login is for the test plugin only.
NEVER_PASSED = frozenset({"AX3L_DB_ADMIN_USER", "AX3L_DB_ADMIN_PASSWORD", "AX3L_DB_ENV"})
SNAKELAB_KEYS = (
    "SNAKELAB_DB_HOST", "SNAKELAB_DB_PORT", "SNAKELAB_DB_USER", "SNAKELAB_DB_PASSWORD",
    "SNAKELAB_DB_NAME", "SNAKELAB_DB_WAIT_SECONDS", "SNAKELAB_TRAINER",
    "SNAKELAB_SURROGATE_SECONDS", "SNAKELAB_EVENTS_PORT", "SNAKELAB_SCHEMA_PATH",
    "SNAKELAB_MAX_MESSAGE_BYTES", "SNAKELAB_LOG_LEVEL",
)  # fmt: skip
DB_LOGIN = ("DB_USER", "DB_PASSWORD")
REPORTS_LOGIN = ("AX3L_REPORTS_DB_USER", "AX3L_REPORTS_DB_PASSWORD")


@dataclass(frozen=True)
class Service:
    """One long-running process of the stack."""

    name: str
    command: list[str]
    # Environment variables the service reads (documented in README's settings table).
    env_keys: tuple[str, ...]
    health_url: str | None = None
    ready_url: str | None = None
    # A SnakeLab control endpoint whose `health` request stands in for an HTTP health check.
    zmq_health: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The process's environment: what it reads, plus what a Python process needs."""
        wanted = set(self.env_keys)
        chosen = {
            key: value
            for key, value in env.items()
            if (key in wanted or key in PROCESS_KEYS or key.startswith(PROCESS_PREFIXES))
            and key not in NEVER_PASSED
        }
        return {**chosen, **self.extra_env}


def _ax3l_keys(model: type[BaseModel], *extra: str, without: Iterable[str] = ()) -> tuple[str, ...]:
    return tuple(sorted((setting_names(model) | set(extra)) - set(without) - NEVER_PASSED))


def reports_login_configured(env: dict[str, str]) -> bool:
    return bool(env.get("AX3L_REPORTS_DB_USER"))


def services(env: dict[str, str]) -> list[Service]:
    """The stack's processes, in start order, for the given environment."""
    from ax3l.reports.settings import ReportsSettings
    from ax3l.shared.settings import Settings

    host = env.get("AX3L_HTTP_HOST", "127.0.0.1")
    snakelab_port = env.get("SNAKELAB_PORT", "41970")

    def urls(port_key: str, default: str) -> tuple[str, str]:
        base = f"http://{host}:{env.get(port_key, default)}"
        return f"{base}/health", f"{base}/ready"

    # The report server reads its own SELECT-only login; Ax3l's read-write one only when no
    # reports login is configured (a database set up by hand).
    reports_without = ("AX3L_CONVERSATION_PARAMETER",) + (
        DB_LOGIN if reports_login_configured(env) else ()
    )
    return [
        Service(
            "snakelab",
            ["snakelab-server", "--address", "127.0.0.1", "--port", snakelab_port],
            SNAKELAB_KEYS,
            zmq_health=f"tcp://127.0.0.1:{snakelab_port}",
        ),
        Service(
            "toolbroker",
            ["ax3l-toolbroker"],
            _ax3l_keys(
                Settings,
                "AX3L_TEST_CRASH_AT",
                without=(*REPORTS_LOGIN, "AX3L_CONVERSATION_PARAMETER"),
            ),
            *urls("AX3L_TOOLBROKER_PORT", "28872"),
        ),
        Service(
            "orchestrator",
            ["ax3l-orchestrator"],
            _ax3l_keys(
                Settings,
                "AX3L_TEST_CRASH_AT",
                without=(*REPORTS_LOGIN, "AX3L_CONVERSATION_PARAMETER"),
            ),
            *urls("AX3L_ORCHESTRATOR_PORT", "28871"),
        ),
        Service(
            "reports",
            ["ax3l-reports"],
            _ax3l_keys(ReportsSettings, without=reports_without),
            *urls("AX3L_REPORTS_PORT", "28870"),
        ),
    ]


def stack_env() -> dict[str, str]:
    """Every setting the stack knows: the shell's, over the private MariaDB's settings.

    Each process gets only its own part of it (``Service.environment``).
    """
    db_env = RUN_DIR / "db.env"
    if not db_env.exists():
        sys.exit(f"stack: no {db_env}; run `scripts/mariadb.sh start` (make does it for you)")
    env = read_env_file(db_env)
    env.setdefault("SNAKELAB_TRAINER", "drqn")
    env.update(os.environ)  # the user's settings win over the defaults above
    env.setdefault("SNAKELAB_PORT", "41970")
    env.setdefault("AX3L_SNAKELAB_ENDPOINT", f"tcp://127.0.0.1:{env['SNAKELAB_PORT']}")
    return env


def float_setting(env: dict[str, str], key: str, default: float) -> float:
    try:
        return float(env.get(key, default))
    except ValueError:
        sys.exit(f"stack: {key} must be a number, not {env[key]!r}")


def venv_bin(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def create_schema(env: dict[str, str]) -> None:
    """Create or check the schema, waiting (bounded) for a database that is coming back."""
    from ax3l.shared.db.cli import ensure_schema
    from ax3l.shared.db.errors import DatabaseError, DatabaseUnavailable
    from ax3l.shared.settings import Settings

    settings = Settings(**{k: v for k, v in env.items() if k not in NEVER_PASSED})
    wait = float_setting(env, "AX3L_STACK_DB_WAIT", 120.0)
    unavailable: list[DatabaseUnavailable] = []  # each failed attempt's reason

    def schema_summary() -> str | None:
        try:
            return ensure_schema(settings)
        except DatabaseUnavailable as exc:
            if not unavailable:
                print(f"stack: waiting up to {wait:g} s for the database ({exc})", flush=True)
            unavailable.append(exc)
            return None

    try:
        summary = wait_until(schema_summary, wait, "the database", interval=1.0)
    except WaitTimeout:
        sys.exit(f"stack: the database did not come back within {wait:g} s: {unavailable[-1]}")
    except DatabaseError as exc:
        sys.exit(f"stack: {exc}")
    print(f"stack: {summary}")


def log_path(service: Service) -> Path:
    return LOG_DIR / f"{service.name}.log"


def pid_path(service: Service) -> Path:
    return PID_DIR / f"{service.name}.pid"


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _runs(pid: int, needle: str) -> bool:
    """Whether process ``pid`` runs ``needle`` (a recycled pid must not be taken for ours)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc to ask: trust the pid file
    return needle.encode() in cmdline


def read_pid(path: Path, needle: str) -> int | None:
    """The live process a pid file names, or None (a stale file is removed)."""
    if not path.exists():
        return None
    try:
        pid = int(path.read_text())
    except (ValueError, OSError):
        path.unlink(missing_ok=True)
        return None
    if process_alive(pid) and _runs(pid, needle):
        return pid
    path.unlink(missing_ok=True)
    return None


def running_pid(service: Service) -> int | None:
    return read_pid(pid_path(service), Path(service.command[0]).name)


def supervisor_pid() -> int | None:
    return read_pid(SUPERVISOR_PID, "stack.py")


def read_state() -> dict[str, Any]:
    try:
        state = json.loads(STATE_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def http_get(url: str, timeout: float = 2.0) -> tuple[int | None, Any]:
    """The status code and JSON body of a GET (None when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            status, body = reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    except (OSError, ValueError):
        return None, None
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


def healthy(service: Service) -> bool:
    if service.zmq_health is not None:
        try:
            from snakelab.healthcheck import ping
        except ImportError:
            return True
        try:
            return ping(service.zmq_health, timeout=0.5)
        except Exception:
            return False
    if service.health_url is None:
        return True
    return http_get(service.health_url, timeout=1.0)[0] == 200


def terminate(service: Service, timeout: float = 15) -> None:
    """Stop a service a supervisor no longer looks after (its pid file names it)."""
    pid = running_pid(service)
    if pid is None:
        return

    def reap() -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)

    end_group(pid, timeout, reap)
    pid_path(service).unlink(missing_ok=True)
    print(f"stack: {service.name} stopped")


class GaveUp(Exception):
    """A service crashed too often right after starting."""


@dataclass
class Child:
    """A supervised service: its process (ours, or adopted from a pid file) and its record."""

    service: Service
    proc: ManagedProcess | None = None
    pid: int | None = None
    started: float = 0.0
    started_at: str = ""
    restarts: int = 0
    quick_crashes: int = 0
    restart_at: float | None = None  # set while backing off
    last_exit: str | None = None

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.alive()
        return self.pid is not None and process_alive(self.pid)

    def exit_text(self) -> str:
        code = None if self.proc is None else self.proc.returncode
        if code is None:
            return "exited"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by {signal.Signals(-code).name}"
        return f"exited with {code}"

    def record(self) -> dict[str, Any]:
        if self.restart_at is not None:
            state = "backing off"
        else:
            state = "running" if self.alive() else "stopped"
        return {
            "pid": self.pid,
            "state": state,
            "restarts": self.restarts,
            "started_at": self.started_at,
            "last_exit": self.last_exit,
        }


class Supervisor:
    """Starts the services in order and keeps them running (compose's unless-stopped)."""

    def __init__(self, env: dict[str, str], foreground: bool):
        self.env = env
        self.foreground = foreground
        self.children = [Child(service) for service in services(env)]
        self.restart_limit = int(float_setting(env, "AX3L_STACK_RESTART_LIMIT", 10))
        self.backoff_max = float_setting(env, "AX3L_STACK_BACKOFF_MAX", 60.0)
        self.stopping = False
        self.state = "starting"
        self.message = ""

    # -- the record other commands read ------------------------------------------------------

    def note(self, message: str, child: Child | None = None) -> None:
        """One line in the stack's log (and in the service's own log when it is about one)."""
        line = f"{now_text()} stack: {message}"
        print(line, flush=True)
        if self.foreground:
            with STACK_LOG.open("a") as log:
                log.write(line + "\n")
        if child is not None:
            with log_path(child.service).open("a") as log:
                log.write(f"==== {line}\n")

    def save(self) -> None:
        state = {
            "supervisor_pid": os.getpid(),
            "state": self.state,
            "message": self.message,
            "updated_at": now_text(),
            "services": {child.service.name: child.record() for child in self.children},
        }
        tmp = STATE_FILE.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, STATE_FILE)

    # -- processes ---------------------------------------------------------------------------

    def launch(self, child: Child) -> None:
        service = child.service
        child.proc = ManagedProcess(
            service.name,
            [venv_bin(service.command[0]), *service.command[1:]],
            service.environment(self.env),
            log_path(service),
            new_session=True,  # its own group: stopping it stops its MCP children
            cwd=REPO,
            stdin=subprocess.DEVNULL,
        )
        child.pid = child.proc.pid
        child.started = time.monotonic()
        child.started_at = now_text()
        child.restart_at = None
        pid_path(service).write_text(str(child.pid))

    def adopt(self, child: Child) -> bool:
        """Take over a service a previous supervisor left running."""
        pid = running_pid(child.service)
        if pid is None:
            return False
        child.pid, child.proc = pid, None
        child.started, child.started_at = time.monotonic(), now_text()
        self.note(f"{child.service.name} already running (pid {pid}): supervising it")
        return True

    def watch(self, child: Child) -> None:
        """Restart a service that exited, with backoff; raise GaveUp after quick crashes."""
        if child.pid is None:
            return
        if child.restart_at is not None:
            if time.monotonic() >= child.restart_at:
                child.restarts += 1
                self.launch(child)
                self.note(
                    f"{child.service.name} restarted (pid {child.pid}, restart {child.restarts})",
                    child,
                )
                self.save()
            return
        if child.alive():
            return
        uptime = time.monotonic() - child.started
        child.quick_crashes = child.quick_crashes + 1 if uptime < QUICK_CRASH_SECONDS else 0
        child.last_exit = f"{child.exit_text()} after {uptime:.1f} s at {now_text()}"
        pid_path(child.service).unlink(missing_ok=True)
        if child.quick_crashes >= self.restart_limit:
            self.message = (
                f"{child.service.name} crashed {child.quick_crashes} times in a row within"
                f" {QUICK_CRASH_SECONDS:g} s of starting; giving up; see {log_path(child.service)}"
            )
            self.note(self.message, child)
            raise GaveUp(self.message)
        delay = min(BACKOFF_START * 2**child.quick_crashes, self.backoff_max)
        child.restart_at = time.monotonic() + delay
        self.note(
            f"{child.service.name} {child.last_exit}; restarting in {delay:g} s"
            f" (restart {child.restarts + 1})",
            child,
        )
        self.save()

    def watch_all(self) -> None:
        for child in self.children:
            self.watch(child)

    def start_all(self) -> None:
        for child in self.children:
            if self.stopping:
                return
            if not self.adopt(child):
                self.launch(child)
            try:
                wait_until(lambda child=child: self.started(child), HEALTH_TIMEOUT, interval=0.2)
            except WaitTimeout:
                self.note(
                    f"{child.service.name} not healthy after {HEALTH_TIMEOUT:g} s;"
                    f" going on (see {log_path(child.service)})"
                )
            else:
                if not self.stopping:
                    self.note(f"{child.service.name} started (pid {child.pid})")
            self.save()

    def started(self, child: Child) -> bool:
        """Whether to go on to the next service: ``child`` is healthy, or we are stopping.
        Meanwhile the services already started are watched (and restarted)."""
        if self.stopping:
            return True
        self.watch_all()
        return child.restart_at is None and child.alive() and healthy(child.service)

    def stop_all(self) -> None:
        for child in reversed(self.children):
            child.restart_at = None
            if child.pid is not None and child.alive():
                if child.proc is not None:
                    child.proc.stop_group()
                else:  # adopted from a previous supervisor: not our child
                    end_group(child.pid)
                self.note(f"{child.service.name} stopped")
            pid_path(child.service).unlink(missing_ok=True)

    def run(self, on_started: Callable[[], None] | None = None) -> int:
        PID_DIR.mkdir(parents=True, exist_ok=True)
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        lock = SUPERVISOR_LOCK.open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("stack: another supervisor is running this stack", file=sys.stderr)
            return LOCK_BUSY
        SUPERVISOR_PID.write_text(str(os.getpid()))

        def _stop(*_: object) -> None:
            self.stopping = True

        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGTERM, _stop)
        code = 0
        self.note(f"supervisor started (pid {os.getpid()})")
        self.save()
        try:
            self.start_all()
            if not self.stopping:
                self.state = "running"
                self.save()
                if on_started is not None:
                    on_started()
            while not self.stopping:
                self.watch_all()
                time.sleep(0.2)
        except GaveUp:
            code = 1
        finally:
            self.state = "stopping"
            self.save()
            self.stop_all()
            self.state = "gave up" if code else "stopped"
            self.save()
            self.note("supervisor stopped")
            SUPERVISOR_PID.unlink(missing_ok=True)
            lock.close()
        return code


def urls(env: dict[str, str]) -> str:
    host = env.get("AX3L_HTTP_HOST", "127.0.0.1")
    reports = f"http://{host}:{env.get('AX3L_REPORTS_PORT', '28870')}"
    orchestrator = f"http://{host}:{env.get('AX3L_ORCHESTRATOR_PORT', '28871')}"
    toolbroker = f"http://{host}:{env.get('AX3L_TOOLBROKER_PORT', '28872')}"
    return "\n".join(
        [
            f"  reports:      {reports}/",
            f"  highscores:   {reports}/experiment-highscores",
            f"  orchestrator: {orchestrator}/api/status",
            f"  toolbroker:   {toolbroker}/api/status",
            f"  logs:         {LOG_DIR}/",
        ]
    )


def prepare(env: dict[str, str]) -> None:
    create_schema(env)
    if env.get("AX3L_LLM_URL"):
        print(f"stack: proposer llm at {env['AX3L_LLM_URL']}")
    else:
        print("stack: no AX3L_LLM_URL set: the orchestrator uses the built-in tpe proposer")
    print(f"stack: SnakeLab trainer {env['SNAKELAB_TRAINER']}")
    if not reports_login_configured(env):
        print("stack: no AX3L_REPORTS_DB_USER: the report server uses Ax3l's read-write login")


def already_running(env: dict[str, str], pid: int) -> int:
    print(f"stack: already running (supervisor pid {pid})")
    for service in services(env):
        service_pid = running_pid(service)
        if service_pid:
            print(f"stack: {service.name} already running (pid {service_pid})")
    print("Ax3l is running:\n" + urls(env))
    return 0


def run_foreground() -> int:
    env = stack_env()
    pid = supervisor_pid()
    if pid is not None:
        sys.exit(f"stack: already running in the background (supervisor pid {pid}); `make stop`")
    prepare(env)

    def started() -> None:
        print("Ax3l is running:\n" + urls(env) + "\nCtrl-C stops everything.", flush=True)

    return Supervisor(env, foreground=True).run(on_started=started)


def start_background() -> int:
    env = stack_env()
    pid = supervisor_pid()
    if pid is not None:
        return already_running(env, pid)
    prepare(env)
    PID_DIR.mkdir(parents=True, exist_ok=True)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    STATE_FILE.unlink(missing_ok=True)
    proc = ManagedProcess(
        "supervisor",
        [sys.executable, str(Path(__file__).resolve()), "supervise"],
        os.environ,
        STACK_LOG,
        new_session=True,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )

    def running() -> dict[str, Any] | None:
        state = read_state()
        if proc.alive() and state.get("supervisor_pid") == proc.pid:
            return state if state.get("state") == "running" else None
        return None

    try:
        state = wait_until(running, START_TIMEOUT, "the stack", interval=0.2, give_up=proc.exited)
    except WaitTimeout:
        code = proc.returncode
        if code == LOCK_BUSY:
            other = supervisor_pid()
            return already_running(env, other) if other else 1
        if code is not None:
            message = read_state().get("message") or f"the supervisor exited with {code}"
            print(f"stack: {message}\nstack: its log: {STACK_LOG}", file=sys.stderr)
            return 1
        print(
            f"stack: not up after {START_TIMEOUT:g} s; the supervisor keeps trying"
            f" (`make status`, {STACK_LOG})",
            file=sys.stderr,
        )
        return 1
    for name, record in state["services"].items():
        print(f"stack: {name} started (pid {record['pid']})")
    print(f"stack: supervisor pid {proc.pid} restarts crashed services; log {STACK_LOG}")
    print("Ax3l is running:\n" + urls(env))
    return 0


def stop() -> int:
    env = stack_env() if (RUN_DIR / "db.env").exists() else dict(os.environ)
    pid = supervisor_pid()
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(WaitTimeout):
            wait_until(lambda: not process_alive(pid), 90, "the supervisor", interval=0.1)
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)
        SUPERVISOR_PID.unlink(missing_ok=True)
        print(f"stack: supervisor {pid} stopped")
    # Services no supervisor looks after any more (it was killed, or never ran).
    for service in reversed(services(env)):
        terminate(service)
    return 0


def readiness(service: Service) -> str:
    """``, ready``, ``, not ready (<problems>)``, or nothing when ``/ready`` does not answer."""
    from pydantic import ValidationError

    from ax3l.shared.readiness import Readiness

    if service.ready_url is None:
        return ""
    status, body = http_get(service.ready_url)
    if status is None:
        return ""
    if status == 200:
        return ", ready"
    try:
        problems = "; ".join(Readiness.model_validate(body).problems)
    except ValidationError:  # something else answers on the port
        problems = ""
    return f", not ready ({problems or status})"


def status() -> int:
    """Print each service: running or not, pid, restarts, health; the orchestrator's phase."""
    env = stack_env() if (RUN_DIR / "db.env").exists() else dict(os.environ)
    state = read_state()
    records = state.get("services", {})
    pid = supervisor_pid()
    if pid is not None:
        print(f"supervisor    running      pid {pid:<8} {state.get('state', '?')}")
    else:
        gone = state.get("message") or state.get("state") or "never started"
        print(f"supervisor    not running  ({gone})")
    everything = pid is not None
    for service in services(env):
        service_pid = running_pid(service)
        record = records.get(service.name, {})
        if service_pid is not None:
            health = "ok" if healthy(service) else "no answer"
            health += readiness(service)
        else:
            health = record.get("state", "-")
            everything = False
        line = (
            f"{service.name:<13} {'running' if service_pid else 'not running':<12}"
            f" pid {service_pid or '-':<8} restarts {record.get('restarts', 0):<3}"
            f" health {health}"
        )
        if record.get("last_exit"):
            line += f"; last exit: {record['last_exit']}"
        print(line)
    orchestrator = next(s for s in services(env) if s.name == "orchestrator")
    assert orchestrator.health_url is not None
    _, body = http_get(orchestrator.health_url.replace("/health", "/api/status"))
    if isinstance(body, dict):
        phase = body.get("phase", "?")
        detail = [f"{key} {body[key]}" for key in ("parameter", "run_id") if body.get(key)]
        if body.get("stop_reason"):
            detail.append(f"stop reason: {body['stop_reason']}")
        print(f"orchestrator phase: {phase}" + (f" ({', '.join(detail)})" if detail else ""))
    else:
        print("orchestrator phase: unknown (its status API does not answer)")
    print(f"logs: {LOG_DIR}/")
    return 0 if everything else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("action", choices=["run", "start", "stop", "status", "supervise"])
    args = parser.parse_args(argv)
    if args.action == "stop":
        return stop()
    if args.action == "status":
        return status()
    if args.action == "supervise":
        return Supervisor(stack_env(), foreground=False).run()
    if args.action == "run":
        return run_foreground()
    return start_background()


if __name__ == "__main__":
    sys.exit(main())
