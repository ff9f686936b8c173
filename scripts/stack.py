"""Run the whole Ax3l stack as local, supervised processes: ``make run/start/stop/status``.

The private MariaDB is started by ``scripts/mariadb.sh`` (the Makefile does it first); this
script waits for it (bounded), creates the schema and hands the services to a supervisor that
starts, in order, the reference SnakeLab, the toolbroker, the seats' endpoint (only with
``AX3L_PROPOSER=external``), the orchestrator and the report server, and restarts any of them
that exits, with backoff, the way compose's ``restart: unless-stopped`` does. It gives up (and
stops the stack) only after a service crashed ``AX3L_STACK_RESTART_LIMIT`` times in a row within
seconds of starting.

``run`` supervises in the foreground (Ctrl-C stops everything); ``start`` leaves the
supervisor in the background (pid in ``<run dir>/stack/supervisor.pid``, log in
``<run dir>/logs/stack.log``); ``stop`` ends it and its children; ``status`` prints each
service. The services, the settings each is given and the restart policy are
``ax3l.shared.stack`` (``spec.services(env)``, ``supervisor``), which the tests' stack, the chaos
tier and ``ax3l-compare``'s repeats build from too; this script adds the pid files, the state
file ``status`` reads and the stack's log. Every log under ``<run dir>/logs`` (each service's
and the stack's) is rotated by the supervisor at ``AX3L_STACK_LOG_MAX_MB``, keeping
``AX3L_STACK_LOG_KEEP`` older generations (``ax3l.shared.logrotate``).

With ``AX3L_PROPOSER=external`` the seats' MCP endpoint runs as a service of its own, as in
compose (``python -m ax3l.orchestrator.seat_process serve``, logged in as
``AX3L_SEATS_DB_USER``): the orchestrator shares the turn board with it over the unix socket
``<run dir>/seats/board.sock`` (``AX3L_SEATS_BOARD_SOCKET``, mode 0600 in a 0700 folder), and
holds neither the seats' login nor its password.
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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ax3l.shared.env_files import read_env_file
from ax3l.shared.logrotate import LogRotation
from ax3l.shared.processes import ManagedProcess, end_group, process_alive
from ax3l.shared.stack.spec import (
    DEFAULT_PORTS,
    NEVER_PASSED,
    Service,
    http_get,
    port,
    reports_login_configured,
    seats_apart,
    seats_login_configured,
    services,
)
from ax3l.shared.stack.supervisor import (
    Adopted,
    Child,
    GaveUp,
    RestartPolicy,
    now_text,
)
from ax3l.shared.stack.supervisor import Supervisor as BaseSupervisor
from ax3l.shared.waiting import WaitTimeout, wait_until

if TYPE_CHECKING:
    from ax3l.shared.settings import Settings

REPO = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("AX3L_RUN_DIR", REPO / ".run"))
PID_DIR = RUN_DIR / "stack"
LOG_DIR = RUN_DIR / "logs"
SUPERVISOR_PID = PID_DIR / "supervisor.pid"
SUPERVISOR_LOCK = PID_DIR / "supervisor.lock"
STATE_FILE = PID_DIR / "state.json"
STACK_LOG = LOG_DIR / "stack.log"
# Where the orchestrator and the seats' endpoint share the turn board (proposer external).
BOARD_SOCKET = RUN_DIR / "seats" / "board.sock"
SOCKET_PATH_MAX = 107  # bytes of a unix socket's path (sun_path), its final NUL left out

HEALTH_TIMEOUT = 60.0
START_TIMEOUT = 300.0
LOCK_BUSY = 3  # the supervisor's exit code when another one holds the lock


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
    env.setdefault("SNAKELAB_PORT", DEFAULT_PORTS["SNAKELAB_PORT"])
    env.setdefault("AX3L_SNAKELAB_ENDPOINT", f"tcp://127.0.0.1:{env['SNAKELAB_PORT']}")
    if seats_apart(env) and not env.get("AX3L_SEATS_BOARD_SOCKET"):
        env["AX3L_SEATS_BOARD_SOCKET"] = str(BOARD_SOCKET)
    return env


def stack_services(env: dict[str, str]) -> list[Service]:
    """The services this stack supervises: ``spec.services`` without the reference SnakeLab
    when the user named a SnakeLab of their own (``AX3L_SNAKELAB_ENDPOINT`` or
    ``AX3L_SNAKELAB_ENDPOINTS`` in the environment)."""
    theirs = any(os.environ.get(k) for k in ("AX3L_SNAKELAB_ENDPOINT", "AX3L_SNAKELAB_ENDPOINTS"))
    return [s for s in services(env) if not (theirs and s.name == "snakelab")]


def ax3l_settings(env: dict[str, str]) -> Settings:
    """Ax3l's settings from the stack's environment, the tests' admin login left out."""
    from ax3l.shared.settings import Settings

    values: dict[str, Any] = {k: v for k, v in env.items() if k not in NEVER_PASSED}
    return Settings(**values)


def float_setting(env: dict[str, str], key: str, default: float) -> float:
    try:
        return float(env.get(key, default))
    except ValueError:
        sys.exit(f"stack: {key} must be a number, not {env[key]!r}")


def log_rotation(env: dict[str, str]) -> LogRotation:
    """Each log under ``LOG_DIR`` rotated at ``AX3L_STACK_LOG_MAX_MB`` (MiB), the
    ``AX3L_STACK_LOG_KEEP`` newest older generations kept (``ax3l.shared.logrotate``)."""
    max_mb = float_setting(env, "AX3L_STACK_LOG_MAX_MB", 10.0)
    keep = float_setting(env, "AX3L_STACK_LOG_KEEP", 5)
    if max_mb <= 0 or keep < 0 or keep != int(keep):
        sys.exit(
            "stack: AX3L_STACK_LOG_MAX_MB must be above 0 and AX3L_STACK_LOG_KEEP a whole"
            f" number of 0 or more, not {max_mb:g} and {keep:g}"
        )
    return LogRotation(max(1, round(max_mb * 1024 * 1024)), int(keep))


def venv_bin(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def create_schema(env: dict[str, str]) -> None:
    """Create or check the schema, waiting (bounded) for a database that is coming back."""
    from ax3l.shared.db.cli import ensure_schema
    from ax3l.shared.db.errors import DatabaseError, DatabaseUnavailable

    settings = ax3l_settings(env)
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


def log_path(name: str) -> Path:
    return LOG_DIR / f"{name}.log"


def pid_path(name: str) -> Path:
    return PID_DIR / f"{name}.pid"


def read_pid(path: Path, needle: str) -> int | None:
    """The live process a pid file names, or None (a stale file is removed). A recycled pid is
    not taken for ours: the process's command line must hold ``needle``."""
    try:
        pid = int(path.read_text())
    except (ValueError, OSError):
        pid = 0  # no file, or no pid in it
    if pid > 0 and process_alive(pid):
        try:
            if needle.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            return pid  # no /proc to ask: trust the pid file
    path.unlink(missing_ok=True)
    return None


def running_pid(service: Service) -> int | None:
    return read_pid(pid_path(service.name), service.marker())


def supervisor_pid() -> int | None:
    return read_pid(SUPERVISOR_PID, "stack.py")


def read_state() -> dict[str, Any]:
    try:
        state = json.loads(STATE_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def terminate(service: Service, timeout: float = 15) -> None:
    """Stop a service a supervisor no longer looks after (its pid file names it)."""
    pid = running_pid(service)
    if pid is None:
        return
    end_group(pid, timeout)
    pid_path(service.name).unlink(missing_ok=True)
    print(f"stack: {service.name} stopped")


class Supervisor(BaseSupervisor):
    """The shared supervisor with make run's record: pid files, the state file ``status``
    reads, the stack's log; it adopts services a previous supervisor left running."""

    def __init__(self, env: dict[str, str], foreground: bool):
        self.env = env
        self.foreground = foreground
        self.state = "starting"
        self.message = ""
        policy = RestartPolicy(
            backoff_max=float_setting(env, "AX3L_STACK_BACKOFF_MAX", 60.0),
            give_up_after=int(float_setting(env, "AX3L_STACK_RESTART_LIMIT", 10)),
        )
        self.specs = {service.name: service for service in stack_services(env)}
        children = [self._child(service) for service in self.specs.values()]
        super().__init__(children, policy, log_rotation(env))

    def _child(self, service: Service) -> Child:
        def launch() -> ManagedProcess:
            return ManagedProcess(
                service.name,
                [venv_bin(service.command[0]), *service.command[1:]],
                service.environment(self.env),
                log_path(service.name),
                new_session=True,  # its own group: stopping it stops its MCP children
                cwd=REPO,
                stdin=subprocess.DEVNULL,
            )

        return Child(service.name, launch, log_path=log_path(service.name), healthy=service.healthy)

    def note(self, message: str, child: Child | None = None) -> None:
        """One line in the stack's log (and in the service's own log when it is about one)."""
        line = f"{now_text()} stack: {message}"
        print(line, flush=True)
        if self.foreground:
            with STACK_LOG.open("a") as log:
                log.write(line + "\n")
        super().note(message, child)

    def logs(self) -> list[Path | None]:
        """The services' logs and the stack's own."""
        return [*super().logs(), STACK_LOG]

    def launched(self, child: Child) -> None:
        pid_path(child.name).write_text(str(child.pid()))

    def exited(self, child: Child) -> None:
        pid_path(child.name).unlink(missing_ok=True)

    def changed(self) -> None:
        state = {
            "supervisor_pid": os.getpid(),
            "state": self.state,
            "message": self.message,
            "updated_at": now_text(),
            "services": {child.name: child.record() for child in self.children},
        }
        tmp = STATE_FILE.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, STATE_FILE)

    def adopt_or_launch(self, child: Child) -> None:
        """Take over a service a previous supervisor left running, else start it."""
        pid = running_pid(self.specs[child.name])
        if pid is None:
            self.launch(child)
            return
        self.adopt(child, Adopted(pid))
        self.note(f"{child.name} already running (pid {pid}): supervising it")

    def alert_gave_up(self, gave_up: GaveUp) -> None:
        """The alert (``AX3L_NOTIFY_URLS``) that this supervisor gave up on a service: once,
        since a supervisor that gives up stops; sent even when the database is down."""
        from ax3l.shared.alerts import Alert, send_once_blocking

        alert = Alert(
            f"service_gave_up:{os.getpid()}:{now_text()}",
            "service_gave_up",
            "Ax3l: make run's supervisor gave up and stopped the stack",
            str(gave_up),
            severity="failure",
        )
        try:
            settings = ax3l_settings(self.env)
            send_once_blocking(settings, alert, unlogged_ok=True)
        except Exception as exc:  # the stack stops anyway; the log says why no alert went
            self.note(f"could not send the alert: {type(exc).__name__}: {exc}")

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
        self.changed()
        try:
            self.start_all(HEALTH_TIMEOUT, self.adopt_or_launch)
            if not self.stopping:
                self.state = "running"
                self.changed()
                if on_started is not None:
                    on_started()
            while not self.stopping:
                self.watch_all()
                time.sleep(0.2)
        except GaveUp as gave_up:
            self.message = str(gave_up)
            code = 1
            self.alert_gave_up(gave_up)
        finally:
            self.state = "stopping"
            self.changed()
            self.stop_all()
            self.state = "gave up" if code else "stopped"
            self.changed()
            self.note("supervisor stopped")
            SUPERVISOR_PID.unlink(missing_ok=True)
            lock.close()
        return code


def urls(env: dict[str, str]) -> str:
    found = {s.name: s for s in stack_services(env)}
    base = {name: str(s.health_url).removesuffix("/health") for name, s in found.items()}
    reports, orchestrator, toolbroker = base["reports"], base["orchestrator"], base["toolbroker"]
    lines = [
        f"  reports:      {reports}/",
        f"  highscores:   {reports}/experiment-highscores",
        f"  orchestrator: {orchestrator}/api/status",
        f"  toolbroker:   {toolbroker}/api/status",
    ]
    if "seats" in found:
        host = env.get("AX3L_SEATS_HOST", "127.0.0.1")
        lines.append(f"  seats (MCP):  http://{host}:{port(env, 'AX3L_SEATS_PORT')}/mcp")
    return "\n".join([*lines, f"  logs:         {LOG_DIR}/"])


def prepare_board(env: dict[str, str]) -> None:
    """The turn board's folder (0700) for the seats' endpoint, when it runs apart."""
    if not seats_apart(env):
        return
    board = Path(env["AX3L_SEATS_BOARD_SOCKET"])
    if len(os.fsencode(board)) > SOCKET_PATH_MAX:
        sys.exit(
            f"stack: AX3L_SEATS_BOARD_SOCKET={board} is longer than a unix socket's path may be"
            f" ({SOCKET_PATH_MAX} bytes); set a shorter one, or a shorter AX3L_RUN_DIR"
        )
    board.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    print(f"stack: proposer external: the seats' endpoint runs apart, its turn board at {board}")
    if not seats_login_configured(env):
        print("stack: no AX3L_SEATS_DB_USER: the seats' endpoint uses Ax3l's read-write login")


def prepare(env: dict[str, str]) -> None:
    log_rotation(env)  # a wrong setting stops here, not in the background supervisor
    prepare_board(env)
    create_schema(env)
    if env.get("AX3L_PROPOSER"):
        print(f"stack: proposer {env['AX3L_PROPOSER']}")
    elif env.get("AX3L_LLM_URL"):
        print(f"stack: proposer llm at {env['AX3L_LLM_URL']}")
    else:
        print("stack: no AX3L_LLM_URL set: the orchestrator uses the built-in tpe proposer")
    print(f"stack: SnakeLab trainer {env['SNAKELAB_TRAINER']}")
    if not reports_login_configured(env):
        print("stack: no AX3L_REPORTS_DB_USER: the report server uses Ax3l's read-write login")


def already_running(env: dict[str, str], pid: int) -> int:
    print(f"stack: already running (supervisor pid {pid})")
    for service in stack_services(env):
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
    # Services no supervisor looks after any more (it was killed, or never ran); the seats'
    # endpoint too, whatever the proposer now (it has a pid file only if it ran).
    for service in reversed(stack_services({**env, "AX3L_PROPOSER": "external"})):
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
    found = stack_services(env)
    for service in found:
        service_pid = running_pid(service)
        record = records.get(service.name, {})
        if service_pid is not None:
            health = "ok" if service.healthy() else "no answer"
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
    orchestrator = next(s for s in found if s.name == "orchestrator")
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
