"""docs/settings.md is what the settings classes say: ``scripts/settings_doc.py`` writes it from
them (``make settings-doc``), and this test fails while the committed page differs, so a new
setting, default or description reaches the page or CI says which command to run."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

from ax3l.compare.settings import CompareSettings
from ax3l.shared.env_files import setting_names
from ax3l.shared.settings import SERVICE_SETTINGS, Settings

REPO = Path(__file__).resolve().parent.parent
VARIABLE = re.compile(r"`([A-Z][A-Z0-9_]*)`")


def settings_doc() -> ModuleType:
    """scripts/settings_doc.py as a module."""
    spec = importlib.util.spec_from_file_location(
        "settings_doc", REPO / "scripts" / "settings_doc.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


DOC = settings_doc()


def test_the_settings_page_is_what_the_classes_say() -> None:
    """The committed page equals the generated one; the failure names the command to run."""
    page = DOC.PAGE.read_text()
    assert page == DOC.render(), "docs/settings.md is stale: run `make settings-doc` and commit it"


def test_every_variable_of_every_class_has_a_row() -> None:
    """Each variable any program's class reads is in a row of the page, with its field's
    description (a field without a docstring stops the script)."""
    classes: list[type[BaseModel]] = [*SERVICE_SETTINGS.values(), Settings, CompareSettings]
    rows = {name for line in DOC.render().splitlines() if line.startswith("| `") for name in
            VARIABLE.findall(line.split(" | ")[0])}  # fmt: skip
    missing = sorted(set().union(*(setting_names(cls) for cls in classes)) - rows)
    assert not missing, f"variables without a row: {missing}"
    for _title, section in DOC.SECTIONS:
        for name, info in DOC.own_fields(section):
            assert info.description, f"{section.__name__}.{name} has no docstring"


def test_a_stale_page_fails_the_check_with_the_command_to_run(
    tmp_path, monkeypatch, capsys
) -> None:
    stale = tmp_path / "settings.md"
    stale.write_text(DOC.render().replace("`28870`", "`28000`"))
    monkeypatch.setattr(DOC, "PAGE", stale)
    monkeypatch.setattr(DOC, "REPO", tmp_path)
    assert DOC.main(["--check"]) == 1
    assert "run `make settings-doc`" in capsys.readouterr().out
    stale.write_text(DOC.render())
    assert DOC.main(["--check"]) == 0


@pytest.mark.parametrize(
    "row",
    [row for _title, _text, rows in DOC.ELSEWHERE for row in rows],
    ids=lambda row: VARIABLE.findall(row.variables)[0],
)
def test_a_variable_no_class_reads_is_read_in_the_file_it_names(row) -> None:
    """A row the script writes by hand names the file that reads its variables, and no settings
    class reads them (else the class's field documents it), so the list cannot outlive them."""
    text = (REPO / row.read_in).read_text()
    classes = {name for cls in SERVICE_SETTINGS.values() for name in setting_names(cls)}
    for variable in VARIABLE.findall(row.variables):
        assert variable in text, f"{variable} is not read in {row.read_in}"
        assert variable not in classes, f"{variable} is a service's setting: document its field"


def test_types_and_defaults_read_from_the_field() -> None:
    """The type column shows the limits and choices; the default column the value, or ``shown``
    when the field gives it."""
    fields = Settings.model_fields
    assert DOC.type_of(fields["db_port"]) == "integer, ≥ 1, ≤ 65535"
    assert DOC.type_of(fields["llm_fallback"]) == "`tpe`, `random` or `none`"
    assert DOC.type_of(fields["mcp_spawn"]) == "`fork` or `exec`"
    assert DOC.type_of(fields["notify_urls"]) == "secret text"
    assert DOC.default_of(fields["db_query_timeout"]) == "`30`"
    assert DOC.default_of(fields["race_alpha"]) == "`0.1`"
    assert DOC.default_of(fields["db_password"]) == "empty"
    assert DOC.default_of(fields["llm_url"]) == "unset"
    assert DOC.default_of(fields["schema_path"]) == "unset: the bundled copy"
    assert DOC.variables_of(fields["db_name"]) == "`AX3L_DB_NAME` (or `DB_NAME`)"
