"""Each service of the stack, in start order: its command, the settings it reads (its
environment allow-list), its port and its readiness check.

``services(env)`` builds them for one environment (ports and host read from it, with the
defaults of ``make run``); every assembly starts its processes from them: ``make run``
(``scripts/stack.py``) with the console scripts, the tests' stack, the chaos tier and
``ax3l-compare``'s repeats with ``python -m`` of the same modules (``Service.argv``), each with
its own overrides (free ports, fast timings, the surrogate trainer) on top of
``Service.environment``. A process gets only the settings it reads plus what any Python process
needs: an Ax3l service the variables of its settings class (``ax3l.shared.settings.services``),
the reference SnakeLab its own ``SNAKELAB_*``; the private MariaDB's admin login reaches none.
``tests/test_compose.py`` checks compose.yaml's environments against these allow-lists.

With ``AX3L_PROPOSER=external`` the seats' MCP endpoint is a service too (``seats``, compose's
``seats`` service: ``python -m ax3l.orchestrator.seat_process serve``), started before the
orchestrator, which keeps the turn board and shares it over the unix socket
``AX3L_SEATS_BOARD_SOCKET`` (the assembly names it: ``make run`` puts it in its run directory).
The endpoint gets its own database login (``AX3L_SEATS_DB_USER``) and not Ax3l's; the
orchestrator gets neither the seats' login nor its password (but when it starts the endpoint as
its child: no board socket, ``ax3l.orchestrator.seat_process``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ax3l.shared.env_files import setting_names
from ax3l.shared.settings import (
    HttpSettings,
    OrchestratorSettings,
    ReportsSettings,
    SeatsServiceSettings,
    SeatsSettings,
    ToolbrokerSettings,
)
from ax3l.shared.snakelab_client import ping

# What any process needs from the environment (the MCP children get just these: the SDK adds
# SHELL and TERM itself); a service also gets the shell's and Python's own. Nothing else is
# inherited.
BASIC_KEYS = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR")
PROCESS_KEYS = (*BASIC_KEYS, "SHELL", "TERM", "PYTHONPATH", "VIRTUAL_ENV")
PROCESS_PREFIXES = ("LC_",)
# Never handed to any process: the private MariaDB's admin login is for the tests only.
NEVER_PASSED = frozenset({"AX3L_DB_ADMIN_USER", "AX3L_DB_ADMIN_PASSWORD", "AX3L_DB_ENV"})
SNAKELAB_KEYS = (
    "SNAKELAB_DB_HOST", "SNAKELAB_DB_PORT", "SNAKELAB_DB_USER", "SNAKELAB_DB_PASSWORD",
    "SNAKELAB_DB_NAME", "SNAKELAB_DB_WAIT_SECONDS", "SNAKELAB_TRAINER",
    "SNAKELAB_SURROGATE_SECONDS", "SNAKELAB_EVENTS_PORT", "SNAKELAB_SCHEMA_PATH",
    "SNAKELAB_MAX_MESSAGE_BYTES", "SNAKELAB_LOG_LEVEL", "SNAKELAB_HOST_ID",
)  # fmt: skip
DB_LOGIN = ("DB_USER", "DB_PASSWORD")
# The seats' endpoint's login: its service reads it (the orchestrator's class reads it too, for
# the endpoint it may start as its child, but gets it only then, to hand it over).
SEATS_LOGIN = ("AX3L_SEATS_DB_USER", "AX3L_SEATS_DB_PASSWORD")
SEATS_MODULE = "ax3l.orchestrator.seat_process"
# The test hook no settings class reads (``ax3l.shared.crash_points``): the broker and the
# orchestrator, whose crash points the chaos tier arms, get it.
TEST_HOOKS = ("AX3L_TEST_CRASH_AT",)


def default_of(model: type[BaseModel], field: str) -> str:
    """A setting's default, as the environment would give it."""
    return str(model.model_fields[field].default)


# The ports of ``make run`` when none is set: the reference SnakeLab's (it reads no Ax3l
# setting) and the settings' defaults.
DEFAULT_PORTS = {
    "SNAKELAB_PORT": "41970",
    "AX3L_TOOLBROKER_PORT": default_of(HttpSettings, "toolbroker_port"),
    "AX3L_ORCHESTRATOR_PORT": default_of(HttpSettings, "orchestrator_port"),
    "AX3L_REPORTS_PORT": default_of(HttpSettings, "reports_port"),
    "AX3L_SEATS_PORT": default_of(SeatsSettings, "seats_port"),
}


def process_env(env: Mapping[str, str], keys: tuple[str, ...] = PROCESS_KEYS) -> dict[str, str]:
    """What a process needs of ``env`` (the locale, paths, the user): ``keys`` and ``LC_*``."""
    return {k: v for k, v in env.items() if k in keys or k.startswith(PROCESS_PREFIXES)}


@dataclass(frozen=True)
class Service:
    """One long-running process of the stack."""

    name: str
    command: list[str]  # its console script and arguments
    module: str  # what ``python -m`` runs instead of the console script
    # Environment variables the service reads (documented in docs/settings.md).
    env_keys: tuple[str, ...]
    health_url: str | None = None
    ready_url: str | None = None
    # A SnakeLab control endpoint whose `health` request stands in for an HTTP health check.
    zmq_health: str | None = None

    def argv(self, python: str | None = None) -> list[str]:
        """The console script's command, or with ``python`` that interpreter's ``-m``."""
        if python is None:
            return list(self.command)
        if self.command[0] == "python":  # no console script: ``python -m`` already
            return [python, *self.command[1:]]
        return [python, "-m", self.module, *self.command[1:]]

    def marker(self) -> str:
        """What its process's command line holds: the console script's name, or the module."""
        name = self.command[0].rsplit("/", 1)[-1]
        return self.module if name == "python" else name

    def environment(
        self,
        env: Mapping[str, str],
        overrides: Mapping[str, str] | None = None,
        *,
        without: Iterable[str] = (),
    ) -> dict[str, str]:
        """The process's environment: what it reads of ``env`` (but ``without``), plus what a
        Python process needs, then ``overrides`` as they are (an assembly's own settings)."""
        wanted = set(self.env_keys) - with_files(without)
        chosen = {k: v for k, v in env.items() if k in wanted and k not in NEVER_PASSED}
        return {**process_env(env), **chosen, **(overrides or {})}

    def healthy(self, timeout: float = 1.0) -> bool:
        """Whether it answers its health check (SnakeLab's ``health`` request, or ``/health``)."""
        if self.zmq_health is not None:
            try:
                return ping(self.zmq_health, timeout=min(timeout, 0.5))
            except Exception:
                return False
        if self.health_url is None:
            return True
        return http_get(self.health_url, timeout=timeout)[0] == 200


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


def with_files(names: Iterable[str]) -> set[str]:
    """The variables and their ``<NAME>_FILE`` forms (a setting read from a file)."""
    return {form for name in names for form in (name, f"{name}_FILE")}


def settings_keys(
    model: type[BaseModel], *extra: str, without: Iterable[str] = ()
) -> tuple[str, ...]:
    """The variables (and ``<NAME>_FILE`` forms) of a settings class and ``extra``, but
    ``without`` and what is never passed."""
    keys = with_files(setting_names(model) | set(extra))
    return tuple(sorted(keys - with_files(without) - with_files(NEVER_PASSED)))


def reports_login_configured(env: Mapping[str, str]) -> bool:
    return bool(env.get("AX3L_REPORTS_DB_USER"))


def seats_login_configured(env: Mapping[str, str]) -> bool:
    return bool(env.get("AX3L_SEATS_DB_USER"))


def seats_apart(env: Mapping[str, str]) -> bool:
    """Whether the seats' endpoint is a service of the stack: with the proposer ``external``."""
    return env.get("AX3L_PROPOSER") == "external"


def seats_service(env: Mapping[str, str]) -> Service:
    """The seats' endpoint (``seat_process serve``): it reads its class's variables, its own
    login and never Ax3l's but when no seats' login is configured (a database set up by hand).
    Its health check is ``/metrics``, which answers clients on the same machine."""
    without = DB_LOGIN if seats_login_configured(env) else ()
    seats_keys = settings_keys(SeatsServiceSettings, without=without)
    host = env.get("AX3L_SEATS_HOST", default_of(SeatsSettings, "seats_host"))
    loopback = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "localhost": "127.0.0.1"}
    health = None
    if host in loopback or host.startswith("127.") or host == "::1":
        where = loopback.get(host, f"[{host}]" if ":" in host else host)
        health = f"http://{where}:{port(env, 'AX3L_SEATS_PORT')}/metrics"
    return Service(
        "seats", ["python", "-m", SEATS_MODULE, "serve"], SEATS_MODULE, seats_keys, health
    )


def port(env: Mapping[str, str], key: str) -> str:
    """A service's port setting in ``env``, else ``make run``'s default."""
    return env.get(key, DEFAULT_PORTS[key])


def services(env: Mapping[str, str]) -> list[Service]:
    """The stack's processes, in start order, for the given environment."""
    host = env.get("AX3L_HTTP_HOST", default_of(HttpSettings, "http_host"))
    snakelab_port = port(env, "SNAKELAB_PORT")

    def urls(port_key: str) -> tuple[str, str]:
        base = f"http://{host}:{port(env, port_key)}"
        return f"{base}/health", f"{base}/ready"

    # The orchestrator hands the seats' login on only to an endpoint it starts as its child
    # (proposer external, no board socket); the seats' service reads its own.
    child_endpoint = seats_apart(env) and not env.get("AX3L_SEATS_BOARD_SOCKET")
    orchestrator_keys = settings_keys(
        OrchestratorSettings, *TEST_HOOKS, without=() if child_endpoint else SEATS_LOGIN
    )
    # The report server reads its own SELECT-only login; Ax3l's read-write one only when no
    # reports login is configured (a database set up by hand).
    reports_without = DB_LOGIN if reports_login_configured(env) else ()
    seats = [seats_service(env)] if seats_apart(env) else []
    return [
        Service(
            "snakelab",
            ["snakelab-server", "--address", "127.0.0.1", "--port", snakelab_port],
            "snakelab",
            SNAKELAB_KEYS,
            zmq_health=f"tcp://127.0.0.1:{snakelab_port}",
        ),
        Service(
            "toolbroker",
            ["ax3l-toolbroker"],
            "ax3l.toolbroker",
            settings_keys(ToolbrokerSettings, *TEST_HOOKS),
            *urls("AX3L_TOOLBROKER_PORT"),
        ),
        *seats,
        Service(
            "orchestrator",
            ["ax3l-orchestrator"],
            "ax3l.orchestrator",
            orchestrator_keys,
            *urls("AX3L_ORCHESTRATOR_PORT"),
        ),
        Service(
            "reports",
            ["ax3l-reports"],
            "ax3l.reports.main",
            settings_keys(ReportsSettings, without=reports_without),
            *urls("AX3L_REPORTS_PORT"),
        ),
    ]


def service(name: str, env: Mapping[str, str]) -> Service:
    """The service ``name`` of ``services(env)``."""
    return next(found for found in services(env) if found.name == name)
