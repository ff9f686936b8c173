"""The settings page's table (docs/settings.md) and the settings classes say the same thing.

The classes (``Settings`` and the two services' subclasses that add variables of their own) are
the source of truth; the table of docs/settings.md documents them. Every variable a
class reads must have a row with the class's default, and every variable in the table must be a
setting or be listed below with the file that reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices, SecretStr
from pydantic_settings import BaseSettings

from ax3l.compare.settings import CompareSettings
from ax3l.reports.settings import ReportsSettings
from ax3l.shared.db.backup import BackupSettings
from ax3l.shared.settings import Settings

REPO = Path(__file__).resolve().parent.parent
SETTINGS_PAGE = REPO / "docs" / "settings.md"
SETTINGS_CLASSES: list[type[BaseSettings]] = [
    Settings,
    ReportsSettings,
    CompareSettings,
    BackupSettings,
]

SNAKELAB_SERVER = "services/snakelab/src/snakelab/server.py"
SNAKELAB_STORE = "services/snakelab/src/snakelab/run_store.py"
# Variables in the table that no settings class reads: (the file that reads it, why not there).
READ_ELSEWHERE: dict[str, tuple[str, str]] = {
    "AX3L_CONVERSATION_PARAMETER": (
        "services/mcp-snakelab/src/ax3l/app/snakelab/tools/binding.py",
        "set by the orchestrator for each MCP child, never by the user",
    ),
    "AX3L_RUN_DIR": ("scripts/mariadb.sh", "make run's private MariaDB and stack, not a service"),
    "AX3L_DEV_DB_PORT": ("scripts/mariadb.sh", "the private MariaDB's port, not a service's"),
    "AX3L_STACK_RESTART_LIMIT": ("scripts/stack.py", "make run's supervisor, not a service"),
    "AX3L_STACK_BACKOFF_MAX": ("scripts/stack.py", "make run's supervisor, not a service"),
    "AX3L_STACK_DB_WAIT": ("scripts/stack.py", "make run's supervisor, not a service"),
    "AX3L_STACK_LOG_MAX_MB": ("scripts/stack.py", "make run's supervisor, not a service"),
    "AX3L_STACK_LOG_KEEP": ("scripts/stack.py", "make run's supervisor, not a service"),
    # The reference SnakeLab stands in for the user's SnakeLab and imports nothing of Ax3l.
    "SNAKELAB_DB_HOST": (SNAKELAB_STORE, "the reference SnakeLab's own login"),
    "SNAKELAB_DB_PORT": (SNAKELAB_STORE, "the reference SnakeLab's own login"),
    "SNAKELAB_DB_NAME": (SNAKELAB_STORE, "the reference SnakeLab's own login"),
    "SNAKELAB_ADDRESS": (SNAKELAB_SERVER, "the reference SnakeLab's option"),
    "SNAKELAB_PORT": (SNAKELAB_SERVER, "the reference SnakeLab's option"),
    "SNAKELAB_EVENTS_PORT": (SNAKELAB_SERVER, "the reference SnakeLab's option"),
    "SNAKELAB_MAX_MESSAGE_BYTES": (SNAKELAB_SERVER, "the reference SnakeLab's option"),
    "SNAKELAB_DB_WAIT_SECONDS": (SNAKELAB_SERVER, "the reference SnakeLab's option"),
    "SNAKELAB_LOG_LEVEL": (SNAKELAB_SERVER, "the reference SnakeLab's option"),
    "SNAKELAB_HOST_ID": (SNAKELAB_SERVER, "the reference SnakeLab's option"),
    "SNAKELAB_TRAINER": (SNAKELAB_SERVER, "the reference SnakeLab's option"),
    "SNAKELAB_SURROGATE_SECONDS": (SNAKELAB_SERVER, "the reference SnakeLab's option"),
    "SNAKELAB_SCHEMA_PATH": (SNAKELAB_SERVER, "the reference SnakeLab's option"),
    "SNAKELAB_HEALTH_ENDPOINT": (
        "services/snakelab/src/snakelab/healthcheck.py",
        "the container healthcheck's own variable",
    ),
}

UNSET = "unset"
# The words pydantic reads as a boolean, which the table may use (`on`/`off` reads better for some).
BOOLEAN_WORDS = {"true": True, "on": True, "yes": True, "false": False, "off": False, "no": False}
VARIABLE = re.compile(r"`([A-Z][A-Z0-9_]*)`")


@dataclass(frozen=True)
class Row:
    """One variable of the settings table, with the default written for it."""

    variable: str
    default: str


@dataclass(frozen=True)
class Variable:
    """One environment variable a settings class reads."""

    owner: str
    field: str
    variable: str
    default: Any
    falls_back: bool  # another variable of the same field is read when this one is unset


def table_rows(text: str) -> list[Row]:
    """The rows of the first table under the heading ``# Settings``, one per variable."""
    heading = re.search(r"^# Settings$", text, re.MULTILINE)
    assert heading, "no heading '# Settings'"
    table = re.search(r"^\|.*\n(?:\|.*(?:\n|$))*", text[heading.end() :], re.MULTILINE)
    assert table, "no table under '# Settings'"
    rows: list[Row] = []
    for line in table.group(0).splitlines()[2:]:  # the header and its separator
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert len(cells) == 3, f"a settings row needs 3 cells: {line}"
        names = VARIABLE.findall(cells[0])
        assert names, f"a settings row without a variable: {line}"
        # `A`, `B` | `a`, `b`: one default each; otherwise the default is the names' together.
        defaults = cells[1].split(", ")
        if len(defaults) != len(names):
            defaults = [cells[1]] * len(names)
        rows.extend(Row(name, default) for name, default in zip(names, defaults, strict=True))
    return rows


def page_rows() -> list[Row]:
    return table_rows(SETTINGS_PAGE.read_text())


def settings_variables() -> list[Variable]:
    """Every variable of the settings classes with its default; a subclass's variable only when
    it is new or its default differs from the base class's."""
    found: list[Variable] = []
    for cls in SETTINGS_CLASSES:
        for field, info in cls.model_fields.items():
            alias = info.validation_alias
            choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
            names = [choice for choice in choices if isinstance(choice, str)]
            for position, name in enumerate(names):
                variable = Variable(
                    cls.__name__, field, name, info.default, position < len(names) - 1
                )
                if not any(same_variable(variable, known) for known in found):
                    found.append(variable)
    return found


def same_variable(one: Variable, other: Variable) -> bool:
    return (one.variable, one.default, one.falls_back) == (
        other.variable,
        other.default,
        other.falls_back,
    )


def documented_value(cell: str) -> str:
    """What a default cell states: ``unset``, the empty string, or its first code span."""
    if cell.startswith(UNSET):
        return UNSET
    if cell.startswith("empty"):
        return ""
    code = re.match(r"`([^`]*)`", cell)
    return code.group(1) if code else cell


def expected_value(default: Any) -> str:
    if default is None:
        return UNSET
    if isinstance(default, SecretStr):
        return default.get_secret_value()
    if isinstance(default, bool):
        return "true" if default else "false"
    return str(default)


def same_default(variable: Variable, cell: str) -> bool:
    """Whether the table's default cell states the class's default (``5`` is ``5.0``; an empty
    default may be written ``empty`` or ``unset``; a variable with a fallback may be ``unset``)."""
    documented, expected = documented_value(cell), expected_value(variable.default)
    if isinstance(variable.default, bool):
        return BOOLEAN_WORDS.get(documented.lower()) is variable.default
    if documented == expected:
        return True
    if documented == UNSET and (expected == "" or variable.falls_back):
        return True
    try:
        return float(documented) == float(expected)
    except ValueError:
        return False


def test_every_setting_has_a_row() -> None:
    """Each variable of Settings, ReportsSettings and CompareSettings has a row in the settings
    page's table."""
    rows = {row.variable for row in page_rows()}
    missing = sorted({v.variable for v in settings_variables()} - rows)
    assert not missing, f"settings missing from docs/settings.md's table: {missing}"


def test_every_documented_default_is_the_settings_default() -> None:
    """The default in a setting's row is its class's default (for each class that reads it)."""
    rows = {row.variable: row for row in page_rows()}
    wrong = [
        f"{v.variable} ({v.owner}.{v.field}): docs/settings.md says {rows[v.variable].default!r}, "
        f"the class {expected_value(v.default)!r}"
        for v in settings_variables()
        if v.variable in rows and not same_default(v, rows[v.variable].default)
    ]
    assert not wrong, "defaults in docs/settings.md that differ:\n" + "\n".join(wrong)


def test_every_row_is_a_setting_or_read_elsewhere() -> None:
    """Each variable in the settings page's table is read by a settings class, or is listed in
    READ_ELSEWHERE; each variable appears in one row only."""
    variables = [row.variable for row in page_rows()]
    twice = sorted({name for name in variables if variables.count(name) > 1})
    assert not twice, f"variables with more than one row: {twice}"
    known = {v.variable for v in settings_variables()} | READ_ELSEWHERE.keys()
    unknown = sorted(set(variables) - known)
    assert not unknown, f"documented, read by nothing (or add to READ_ELSEWHERE): {unknown}"


@pytest.mark.parametrize("variable", sorted(READ_ELSEWHERE))
def test_read_elsewhere_names_the_file_that_reads_it(variable: str) -> None:
    """An exception of READ_ELSEWHERE is in the settings page's table and in the file it names, so
    the list cannot outlive the variable."""
    path, _reason = READ_ELSEWHERE[variable]
    assert variable in (REPO / path).read_text(), f"{variable} is not read in {path}"
    assert variable in {row.variable for row in page_rows()}, f"{variable} has no documented row"
    assert variable not in {v.variable for v in settings_variables()}, f"{variable} is a setting"


def test_table_rows_split_paired_defaults() -> None:
    """A row naming several variables gives each its own default when the cell lists one per
    variable, and the whole cell to each otherwise."""
    text = (
        "# Settings\n\n| variable | default | meaning |\n|---|---|---|\n"
        "| `A`, `B` | `1`, empty | x |\n| `C` (or `D`) | unset (see `E`) | y |\n"
    )
    assert table_rows(text) == [
        Row("A", "`1`"),
        Row("B", "empty"),
        Row("C", "unset (see `E`)"),
        Row("D", "unset (see `E`)"),
    ]


def test_defaults_compare_by_meaning() -> None:
    """Floats match integers, booleans their words (``true``, ``off``), None ``unset`` and an
    empty secret ``empty``; a different number or truth value does not match."""

    def var(default: Any, falls_back: bool = False) -> Variable:
        return Variable("S", "f", "V", default, falls_back)

    assert same_default(var(5.0), "`5`")
    assert same_default(var(True), "`true`")
    assert same_default(var(False), "`off`")
    assert not same_default(var(False), "`on`")
    assert same_default(var(None), "unset: the bundled copy")
    assert same_default(var(SecretStr("")), "empty")
    assert same_default(var(Path("/opt/a.json")), "`/opt/a.json`")
    assert same_default(var("ax3l", falls_back=True), "unset (`DB_USER`)")
    assert not same_default(var(5.0), "`6`")
    assert not same_default(var(None), "`16384`")
    assert not same_default(var("ax3l"), "unset")
