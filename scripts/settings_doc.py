"""Write docs/settings.md from the settings classes (``make settings-doc``).

Each section of ``ax3l.shared.settings`` becomes a table (a setting's variable, its default, its
type and range, and its description: the docstring under its field), with the services that read
it; then the settings only one program reads, and the variables no settings class reads (the
reference SnakeLab's, ``make run``'s), which this script lists with the file that reads them.
``--check`` exits 1 when the committed page is not what this script writes
(tests/test_settings_documented.py runs it).
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from ax3l.compare.settings import CompareSettings
from ax3l.shared.db.backup import BackupSettings
from ax3l.shared.settings import (
    AdminLoginSettings,
    AlertSettings,
    DbSettings,
    HttpSettings,
    LlmSettings,
    LoopSettings,
    McpServerSettings,
    McpSettings,
    OrchestratorSettings,
    PromotionSettings,
    ReportsSettings,
    SchemaSettings,
    SeatsServiceSettings,
    SeatsSettings,
    Section,
    SnakeLabSettings,
    ToolbrokerSettings,
    ZmqSettings,
)
from ax3l.shared.settings.base import variable_names

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "settings.md"
COMMAND = "make settings-doc"

INTRO = """\
# Settings

Every setting is an environment variable. `make run` reads the private MariaDB's settings from
`.run/db.env`; anything you export wins. Ax3l's services also read any of their variables as
`<NAME>_FILE`, the path of a file holding the value (how compose hands them their secrets,
`DB_PASSWORD_FILE=/run/secrets/ax3l_db_password`; the reference SnakeLab reads
`SNAKELAB_DB_PASSWORD_FILE`); a variable set directly wins over a file.

Each service reads only its own settings class, made of the sections below, and `make run`,
compose and the tests hand each process only the variables of its class. This page is written
from those classes (`shared/src/ax3l/shared/settings/`) by `make settings-doc`: a setting's
description is the docstring under its field.
"""

OUTRO = """\
Variables only the tests read are listed in
`CONTRIBUTING.md` ("Test-only settings and crash hooks"); never set them in
production.
"""

# The programs and the class each reads, in the order of the overview's columns.
PROGRAMS: list[tuple[str, type[Section]]] = [
    ("toolbroker", ToolbrokerSettings),
    ("orchestrator", OrchestratorSettings),
    ("seats' endpoint", SeatsServiceSettings),
    ("MCP server", McpServerSettings),
    ("report server", ReportsSettings),
    ("`ax3l-compare`", CompareSettings),
    ("`ax3l-db`", BackupSettings),
]
SECTIONS: list[tuple[str, type[Section]]] = [
    ("Database", DbSettings),
    ("SnakeLab", SnakeLabSettings),
    ("Tool channel", ZmqSettings),
    ("HTTP services", HttpSettings),
    ("Schema", SchemaSettings),
    ("Model server", LlmSettings),
    ("MCP children", McpSettings),
    ("Experiment loop", LoopSettings),
    ("Promotion and golden", PromotionSettings),
    ("Seats", SeatsSettings),
    ("Alerts", AlertSettings),
    ("Administrator", AdminLoginSettings),
    ("Report server", ReportsSettings),
    ("Comparison", CompareSettings),
]


@dataclass(frozen=True)
class Elsewhere:
    """Variables no settings class reads: a row of their own tables, and the file reading them."""

    variables: str
    default: str
    meaning: str
    read_in: str


SNAKELAB_SERVER = "services/snakelab/src/snakelab/server.py"
SNAKELAB_STORE = "services/snakelab/src/snakelab/run_store.py"
STACK = "scripts/stack.py"
ELSEWHERE: list[tuple[str, str, list[Elsewhere]]] = [
    (
        "Reference SnakeLab",
        "The reference SnakeLab stands in for your SnakeLab and reads no Ax3l setting; its own:",
        [
            Elsewhere(
                "`SNAKELAB_DB_HOST`, `SNAKELAB_DB_PORT`, `SNAKELAB_DB_USER`, "
                "`SNAKELAB_DB_PASSWORD`, `SNAKELAB_DB_NAME`",
                "`127.0.0.1`, `3306`, `snakelab`, empty, `snakelab`",
                "the reference SnakeLab's own database login",
                SNAKELAB_STORE,
            ),
            Elsewhere(
                "`SNAKELAB_ADDRESS`, `SNAKELAB_PORT`",
                "`127.0.0.1`, `41970`",
                "the reference SnakeLab's control socket (`--address`, `--port`)",
                SNAKELAB_SERVER,
            ),
            Elsewhere(
                "`SNAKELAB_EVENTS_PORT`",
                "`41972`",
                "its `snake_lab.simulation.ended` PUB socket (0: off)",
                SNAKELAB_SERVER,
            ),
            Elsewhere(
                "`SNAKELAB_MAX_MESSAGE_BYTES`",
                "`262144`",
                "largest control request it accepts",
                SNAKELAB_SERVER,
            ),
            Elsewhere(
                "`SNAKELAB_DB_WAIT_SECONDS`",
                "`30`",
                "how long it waits for its database at startup",
                SNAKELAB_SERVER,
            ),
            Elsewhere("`SNAKELAB_LOG_LEVEL`", "`INFO`", "its log level", SNAKELAB_SERVER),
            Elsewhere(
                "`SNAKELAB_HOST_ID`",
                "empty",
                "its name in `simulation_runs.host` when several reference SnakeLab hosts share"
                " one database: a restart then fails only its own unfinished runs (empty: the"
                " only host, every unfinished run)",
                SNAKELAB_SERVER,
            ),
            Elsewhere(
                "`SNAKELAB_HEALTH_ENDPOINT`",
                "`tcp://127.0.0.1:41970`",
                "what `python -m snakelab.healthcheck` (the container healthcheck) asks",
                "services/snakelab/src/snakelab/healthcheck.py",
            ),
            Elsewhere(
                "`SNAKELAB_TRAINER`",
                "`drqn`",
                "reference SnakeLab trainer: `drqn` or `surrogate`",
                SNAKELAB_SERVER,
            ),
            Elsewhere(
                "`SNAKELAB_SURROGATE_SECONDS`",
                "`0`",
                "wall time of one surrogate run",
                SNAKELAB_SERVER,
            ),
            Elsewhere(
                "`SNAKELAB_SCHEMA_PATH`",
                "unset: the bundled copy",
                "the reference SnakeLab's schema file",
                SNAKELAB_SERVER,
            ),
        ],
    ),
    (
        "make run",
        "`make run`/`start`'s private MariaDB and supervisor (not a service's settings):",
        [
            Elsewhere(
                "`AX3L_RUN_DIR`",
                "`.run`",
                "where `make run` keeps MariaDB, pids and logs",
                "scripts/mariadb.sh",
            ),
            Elsewhere(
                "`AX3L_DEV_DB_PORT`", "`33306`", "port of the private MariaDB", "scripts/mariadb.sh"
            ),
            Elsewhere(
                "`AX3L_STACK_RESTART_LIMIT`",
                "`10`",
                "`make run`/`start`: crashes in a row, each within 10 s of starting, before the"
                " supervisor gives up",
                STACK,
            ),
            Elsewhere(
                "`AX3L_STACK_BACKOFF_MAX`",
                "`60`",
                "`make run`/`start`: longest wait (s) before restarting a crashed service",
                STACK,
            ),
            Elsewhere(
                "`AX3L_STACK_DB_WAIT`",
                "`120`",
                "`make run`/`start`: seconds to wait for the database before giving up",
                STACK,
            ),
            Elsewhere(
                "`AX3L_STACK_LOG_MAX_MB`",
                "`10`",
                "`make run`/`start`: size (MiB) at which the supervisor rotates a log under"
                " `.run/logs/` (each service's and `stack.log`)",
                STACK,
            ),
            Elsewhere(
                "`AX3L_STACK_LOG_KEEP`",
                "`5`",
                "`make run`/`start`: older generations of each log kept (`orchestrator.log.1`"
                " the newest; 0: the log is only truncated)",
                STACK,
            ),
        ],
    ),
    (
        "Set by Ax3l",
        "Set by Ax3l itself, never by you:",
        [
            Elsewhere(
                "`AX3L_CONVERSATION_PARAMETER`",
                "unset",
                "set by the orchestrator for each MCP child: the single or pair it may submit",
                "services/mcp-snakelab/src/ax3l/app/snakelab/tools/binding.py",
            ),
        ],
    ),
]

TYPE_NAMES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "text",
    SecretStr: "secret text",
    Path: "path",
}
LIMITS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
CHOICES = re.compile(r"^\^\(([\w|]+)\)\$$")


def own_fields(cls: type[Section]) -> list[tuple[str, FieldInfo]]:
    """The fields a class declares itself (not those of the sections it is made of)."""
    declared = inspect.get_annotations(cls)
    return [(name, info) for name, info in cls.model_fields.items() if name in declared]


def choices(values: list[str]) -> str:
    quoted = [f"`{value}`" for value in values]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def type_of(info: FieldInfo) -> str:
    """The kind of value and its limits: ``integer, ≥ 1, ≤ 65535``; ``fork`` or ``exec``."""
    kind: Any = info.annotation
    members = [arg for arg in typing.get_args(kind) if arg is not type(None)]
    if typing.get_origin(kind) is not Literal and members and len(members) == 1:
        kind = members[0]
    if typing.get_origin(kind) is Literal:
        return choices([str(value) for value in typing.get_args(kind)])
    parts = [TYPE_NAMES.get(kind, getattr(kind, "__name__", str(kind)))]
    for limit in info.metadata:
        for name, sign in LIMITS.items():
            value = getattr(limit, name, None)
            if value is not None:
                parts.append(f"{sign} {value}")
        pattern = getattr(limit, "pattern", None)
        if pattern is not None:
            found = CHOICES.match(pattern)
            parts = [choices(found.group(1).split("|"))] if found else [*parts, f"`{pattern}`"]
    return ", ".join(parts)


def default_of(info: FieldInfo) -> str:
    """The default as the page shows it: ``shown`` when the field gives one, else its value."""
    extra = info.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("shown"), str):
        return str(extra["shown"])
    value = info.default
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value is None:
        return "unset"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def variables_of(info: FieldInfo) -> str:
    """``AX3L_DB_NAME`` (or ``DB_NAME``): the variable and the ones read when it is unset."""
    names = [f"`{name}`" for name in variable_names(info)]
    return names[0] if len(names) == 1 else f"{names[0]} (or {', '.join(names[1:])})"


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def readers(section: type[Section]) -> str:
    return ", ".join(name for name, cls in PROGRAMS if issubclass(cls, section))


def section_table(cls: type[Section]) -> list[str]:
    lines = ["| variable | default | type | meaning |", "|---|---|---|---|"]
    for _name, info in own_fields(cls):
        if info.description is None:
            raise SystemExit(f"{cls.__name__}: a field without a docstring ({variables_of(info)})")
        row = [variables_of(info), default_of(info), type_of(info), info.description]
        lines.append("| " + " | ".join(cell(part) for part in row) + " |")
    return lines


def render() -> str:
    """The whole page."""
    lines = [INTRO]
    lines += ["## Who reads what", "", "| program | its sections |", "|---|---|"]
    for program, cls in PROGRAMS:
        parts = [title for title, section in SECTIONS if issubclass(cls, section)]
        lines.append(f"| {program} | {', '.join(parts)} |")
    lines += [
        "",
        "`ax3l-seats` reads what `ax3l-db` does but the administrator's login, which only"
        " `ax3l-db backup` and `restore` use.",
        "",
    ]
    for title, section in SECTIONS:
        summary = cell(section.__doc__ or "")
        lines += [f"## {title}", "", f"{summary} Read by: {readers(section)}.", ""]
        lines += [*section_table(section), ""]
    for title, text, rows in ELSEWHERE:
        lines += [f"## {title}", "", text, "", "| variable | default | meaning |", "|---|---|---|"]
        lines += [f"| {row.variables} | {row.default} | {cell(row.meaning)} |" for row in rows]
        lines.append("")
    return "\n".join(lines) + "\n" + OUTRO


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether the page is current")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        if PAGE.read_text() != page:
            print(f"{PAGE.relative_to(REPO)} is not what the settings classes say: run `{COMMAND}`")
            return 1
        return 0
    PAGE.write_text(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
