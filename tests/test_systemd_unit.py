"""``deploy/systemd/ax3l.service``, installed as docs/operations.md's two lines install it, is a
unit systemd accepts: ``make run`` in the checkout, the whole control group stopped with SIGTERM,
restarted on failure. (Stopping and starting it with a running experiment:
tests/test_systemd_reboot.py, ``make test-long``.)"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
UNIT = REPO / "deploy" / "systemd" / "ax3l.service"


def install_lines() -> list[str]:
    """The shell lines of the systemd install block of docs/operations.md."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text.split("## Start at boot with systemd", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block, "no install block under 'Start at boot with systemd'"
    return [line for line in block.group(1).splitlines() if line.strip()]


def installed_unit(home: Path) -> str:
    """The unit as the docs' first line writes it (its ``sudo tee`` left out)."""
    first = install_lines()[0]
    assert first.endswith("| sudo tee /etc/systemd/system/ax3l.service >/dev/null")
    command = first.split("| sudo tee", 1)[0]
    env = {**os.environ, "PWD": str(REPO), "USER": getpass.getuser(), "HOME": str(home)}
    done = subprocess.run(
        ["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def directives(unit: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in unit.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def test_the_docs_install_a_unit_that_runs_make_run_and_stops_the_whole_group(
    tmp_path: Path,
) -> None:
    """The two lines of docs/operations.md: the unit with every placeholder filled in, then
    daemon-reload and enable --now; the unit runs ``make run`` in this checkout as the user, stops
    its whole control group with SIGTERM, and restarts on failure."""
    lines = install_lines()
    assert len(lines) == 2
    assert lines[1] == "sudo systemctl daemon-reload && sudo systemctl enable --now ax3l"
    unit = installed_unit(tmp_path)
    assert not re.search(r"@[A-Z]+@", unit)
    found = directives(unit)
    assert found["ExecStart"] == [f"/usr/bin/make --no-print-directory -C {REPO} run"]
    assert found["WorkingDirectory"] == [str(REPO)]
    assert found["User"] == [getpass.getuser()]
    assert found["KillMode"] == ["control-group"] and found["KillSignal"] == ["SIGTERM"]
    assert found["Restart"] == ["on-failure"]
    assert found["WantedBy"] == ["multi-user.target"]
    assert re.search(r"^run:", (REPO / "Makefile").read_text(), re.MULTILINE)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_accepts_the_installed_unit(tmp_path: Path) -> None:
    """``systemd-analyze verify`` finds nothing wrong with the unit docs/operations.md installs."""
    path = tmp_path / "ax3l.service"
    path.write_text(installed_unit(tmp_path))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "ax3l.service" not in done.stderr, done.stderr
