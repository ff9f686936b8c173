"""The commands the README and the documentation pages (``docs/``) show work as written after
``make run`` or ``make install``: none needs uv on the PATH (``make`` installs its own copy where
it is missing, which the shell never sees), every ``.venv/bin`` command they name is there, and
the terminal ones run, copied out of the page that shows them, in a checkout-like folder with
``.run/db.env`` and ``.venv``.

The other commands are run by their own tests: the agent example
(``services/orchestrator/tests/test_external_seats.py``), ``optuna-dashboard`` on an export
(``shared/tests/test_export_optuna_dashboard.py``), ``ax3l status`` against live services
(``services/reports/tests/test_terminal.py``), ``make run``/``make start``
(``tests/test_stack.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import optuna

from ax3l.testing.databases import TestDatabases
from ax3l.testing.plugin import free_port

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
# Every page a person reads commands from: the user's README, the documentation site's pages,
# the contributors' guide and each package's README.
READMES = (
    REPO / "README.md",
    *sorted(DOCS.glob("*.md")),
    REPO / "CONTRIBUTING.md",
    REPO / "testing" / "README.md",
    *sorted((REPO / "services").glob("*/README.md")),
)
VENV_BIN = Path(sys.executable).parent
# Named by the README but installed only by `make install-ray` (a Ray node's install).
OPTIONAL = {"ray": "make install-ray"}


def code(text: str) -> list[str]:
    """Every command line the text shows: fenced ``sh`` blocks' lines, indented code blocks'
    lines (four spaces after a blank line) and inline code spans."""
    lines: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        lines += [line.strip() for line in block.splitlines() if line.strip()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for block in re.findall(r"\n\n((?: {4}\S.*\n?)+)", prose):
        lines += [line.strip() for line in block.splitlines() if line.strip()]
    lines += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
    return lines


def fenced_after(page: Path, heading: str) -> list[str]:
    """The lines of the first ``sh`` block after ``heading`` in ``page``, comments cut."""
    text = page.read_text()
    start = text.index("```sh\n", text.index(heading)) + len("```sh\n")
    block = text[start : text.index("```", start)]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def test_no_readme_command_needs_uv_on_the_path_and_every_venv_command_exists() -> None:
    needs_uv = []
    named: set[str] = set()
    for readme in READMES:
        for line in code(readme.read_text()):
            if re.search(r"(^|[;&|] *)(\S+=\S+ )*uvx? \w+ \S", line):
                needs_uv.append(f"{readme.relative_to(REPO)}: {line}")
            named.update(re.findall(r"\.venv/bin/([\w.-]+)", line))
    assert not needs_uv, "uv is not on the PATH after make:\n" + "\n".join(needs_uv)
    assert {"ax3l", "ax3l-seats", "ax3l-db", "ax3l-compare", "optuna-dashboard"} <= named
    missing = [name for name in named - OPTIONAL.keys() if not (VENV_BIN / name).exists()]
    assert not missing, f"not in {VENV_BIN}: {missing}"


def _checkout(dbs: TestDatabases, folder: Path) -> Path:
    """A folder laid out like a checkout after make run: .run/db.env and .venv."""
    (folder / ".run").mkdir()
    env = {**dbs.env(), "AX3L_SEATS_DB_USER": dbs.ax3l_user}
    (folder / ".run" / "db.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    (folder / ".venv").symlink_to(VENV_BIN.parent)
    return folder


def _run(line: str, folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DB_", "AX3L_"))}
    return subprocess.run(
        ["bash", "-c", line],
        cwd=folder,
        env={**clean, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_readmes_seat_export_and_status_commands_run_as_written(
    snakelab_tables: TestDatabases, tmp_path: Path
) -> None:
    folder = _checkout(snakelab_tables, tmp_path)
    seats = fenced_after(DOCS / "agents.md", "Give it a *seat*:")
    assert seats[0].startswith("set -a; . .run/db.env")
    assert seats[-1].startswith("AX3L_PROPOSER=external make run")  # tests/test_stack.py's
    printed = []
    for line in seats[1:-1]:
        done = _run(f"{seats[0]}; {line}", folder)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        printed.append(done.stdout)
    assert printed[0].strip().splitlines()[-1].startswith("ax3l-seat-")  # add
    assert "alice" in printed[1]  # list
    listed = _run(f"{seats[0]}; {seats[2]}", folder).stdout
    assert "alice" in listed and "revoked" in listed.lower()

    export = fenced_after(DOCS / "user-guide.md", "## Open the experiment in Optuna")
    assert export[0] == "make install"  # what `make test` ran before this test
    line = export[1].replace(" [--study NAME]", "")
    done = _run(f"{seats[0]}; {line}", folder)
    assert done.returncode == 0, done.stderr
    assert "added 0 completed" in done.stdout
    assert optuna.load_study(
        study_name=snakelab_tables.ax3l_db, storage=f"sqlite:///{folder}/ax3l-study.db"
    )
    assert export[2].startswith(".venv/bin/optuna-dashboard sqlite:///ax3l-study.db")

    status = re.search(r"`(\.venv/bin/ax3l status)`", (DOCS / "user-guide.md").read_text())
    assert status is not None
    nowhere = str(free_port())
    done = _run(status[1], folder, AX3L_ORCHESTRATOR_PORT=nowhere, AX3L_REPORTS_PORT=nowhere)
    assert done.returncode == 0, done.stderr
    assert f"the orchestrator (http://127.0.0.1:{nowhere}) does not answer" in done.stdout
