"""Each process of the stack gets exactly the settings its class reads.

``stack/spec.py`` derives each service's allow-list from its settings class
(``ax3l.shared.settings.SERVICE_SETTINGS``); these tests set every variable any class reads (and
the ones no service may get) and check what each process is handed: never a variable its class
does not read, every one it reads that is set, but for the deliberate exceptions spec.py names
(the logins a service is not to use, the test hook).
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from ax3l.compare.settings import CompareSettings
from ax3l.shared.db.backup import BackupSettings
from ax3l.shared.env_files import setting_names
from ax3l.shared.settings import SERVICE_SETTINGS, OrchestratorSettings, Settings
from ax3l.shared.stack import spec

ANY_PROCESS = {"PATH": "/bin", "HOME": "/home/ax3l", "LC_ALL": "C.UTF-8"}
FOREIGN = {
    "AX3L_DB_ADMIN_USER": "root",
    "AX3L_DB_ADMIN_PASSWORD": "admin-secret",
    "AX3L_CONVERSATION_PARAMETER": "mystery",
    "AX3L_TEST_CRASH_AT": "loop.after_accept",
    "SNAKELAB_DB_PASSWORD": "snakelab-secret",
    "UNRELATED": "x",
}


def every_variable() -> dict[str, str]:
    """A value for every variable any settings class reads, one ``<NAME>_FILE`` form, the
    variables no Ax3l service reads, and what any process needs."""
    names: set[str] = set()
    classes: list[type[BaseModel]] = [*SERVICE_SETTINGS.values(), CompareSettings, BackupSettings]
    for cls in classes:
        names |= setting_names(cls)
    return {
        **{name: f"value-of-{name}" for name in names},
        "DB_PASSWORD_FILE": "/run/secrets/ax3l_db_password",
        **FOREIGN,
        **ANY_PROCESS,
    }


# The stack's shapes: the proposer external with the seats' endpoint a service of its own, or
# the orchestrator's child, or no seats at all; logins of their own configured for the report
# server and the seats' endpoint, or not (a database set up by hand).
SHAPES = {
    "external, endpoint apart": {"AX3L_PROPOSER": "external"},
    "external, endpoint a child": {"AX3L_PROPOSER": "external", "AX3L_SEATS_BOARD_SOCKET": ""},
    "tpe": {"AX3L_PROPOSER": "tpe"},
    "no logins of their own": {
        "AX3L_PROPOSER": "external",
        "AX3L_REPORTS_DB_USER": "",
        "AX3L_SEATS_DB_USER": "",
    },
}


def expected(name: str, env: dict[str, str]) -> set[str]:
    """What the service ``name`` should get of ``env``: its class's variables that are set, but
    spec.py's deliberate exceptions, plus what any process needs."""
    if name == "snakelab":
        reads = set(spec.SNAKELAB_KEYS)  # the reference SnakeLab reads no Ax3l setting
    else:
        reads = spec.with_files(setting_names(SERVICE_SETTINGS[name]))
    if name in ("toolbroker", "orchestrator"):
        reads |= set(spec.TEST_HOOKS)
    child_endpoint = not env.get("AX3L_SEATS_BOARD_SOCKET")
    if name == "orchestrator" and not child_endpoint:
        reads -= spec.with_files(spec.SEATS_LOGIN)
    if name == "reports" and env.get("AX3L_REPORTS_DB_USER"):
        reads -= spec.with_files(spec.DB_LOGIN)
    if name == "seats" and env.get("AX3L_SEATS_DB_USER"):
        reads -= spec.with_files(spec.DB_LOGIN)
    return (reads - spec.with_files(spec.NEVER_PASSED)) & set(env) | set(ANY_PROCESS)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_process_gets_what_its_class_reads_and_nothing_else(shape: str) -> None:
    env = {**every_variable(), "AX3L_SEATS_BOARD_SOCKET": "/run/board.sock", **SHAPES[shape]}
    env = {k: v for k, v in env.items() if v != ""}
    services = spec.services(env)
    assert {s.name for s in services} - {"snakelab"} <= SERVICE_SETTINGS.keys()
    for service in services:
        got = set(service.environment(env))
        want = expected(service.name, env)
        assert got - want == set(), f"{service.name} gets what its class does not read"
        assert want - got == set(), f"{service.name} misses what its class reads"
        assert not {"admin-secret", "mystery", "x"} & set(service.environment(env).values())


def test_the_broker_gets_no_secret_but_its_database_login() -> None:
    """The narrowest class is the point: the broker reads neither the alerts' URLs (they may
    hold tokens) nor the seats' or the report server's login."""
    env = every_variable()
    broker = spec.service("toolbroker", env).environment(env)
    assert {"DB_USER", "DB_PASSWORD", "DB_PASSWORD_FILE"} <= broker.keys()
    secrets = {"AX3L_NOTIFY_URLS", "AX3L_SEATS_DB_PASSWORD", "AX3L_REPORTS_DB_PASSWORD"}
    assert not secrets & broker.keys()
    assert not {"AX3L_LLM_URL", "AX3L_PROPOSER"} & broker.keys()


def test_the_orchestrator_reads_every_section_of_the_admin_tools_class() -> None:
    """``Settings`` (the admin tools' and tests' class) adds no field to the orchestrator's, so
    the compatibility name widens nothing a service reads."""
    assert Settings.model_fields.keys() == OrchestratorSettings.model_fields.keys()
    others = [cls for name, cls in SERVICE_SETTINGS.items() if name != "reports"]
    assert all(issubclass(Settings, cls) for cls in others)


def test_the_mcp_child_gets_only_what_the_mcp_server_reads() -> None:
    """The orchestrator hands each MCP child a part of the MCP server's class's variables (and
    the child's binding), nothing more."""
    from ax3l.app.snakelab.tools.binding import BINDING_ENV
    from ax3l.orchestrator.mcp_session import child_environment

    settings = Settings(AX3L_SCHEMA_PATH="/srv/schema.json")
    env = child_environment(None, settings)
    reads = setting_names(SERVICE_SETTINGS["mcp-snakelab"]) | {BINDING_ENV}
    ax3l = {k for k in env if k.startswith(("AX3L_", "DB_"))}
    assert ax3l <= reads
    assert {"AX3L_ZMQ_ENDPOINT", "AX3L_ZMQ_TIMEOUT", "AX3L_SCHEMA_PATH"} <= ax3l
