"""``make run`` on a stock Debian 12, as the issue that found it tried it: a container of Debian
12 with Debian's own ``python3`` (no pip, PEP 668) and ``make``, nothing else."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from compose_harness import REPO, Timings

DEBIAN = "debian:bookworm-slim"
# This development machine reaches PyPI through a proxy with a CA of its own, which its
# containers must trust as the machine does (a user's machine needs nothing of the kind).
EXTRA_CAS = Path("/usr/local/share/ca-certificates")
FILES = ("Makefile", "scripts/install-uv.sh", "scripts/uv_wheel.py")
SCRIPT = r"""
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends python3 make ca-certificates >/dev/null
update-ca-certificates >/dev/null 2>&1  # with this machine's extra CAs, if it has any
cp -r /src /work && cd /work
if python3 -m pip --version >/dev/null 2>&1; then echo "pip: present"; else echo "pip: absent"; fi
if command -v uv >/dev/null; then echo "uv on PATH before"; fi
make uv
echo "second:"; make uv
echo "uv: $("$HOME/.cache/ax3l/uv-$(scripts/install-uv.sh --version)/uv" --version)"
echo "run:"; make -n run
echo "test:"; make -n test
"""


def test_make_installs_uv_on_debian_12s_own_python_without_pip(base_images, tmp_path: Path):
    """In a fresh Debian 12 container with Debian's python3 (which has no pip) as root, ``make
    uv`` installs the Dockerfile's uv version into ~/.cache/ax3l (a second ``make uv`` does
    nothing), and ``make run`` syncs without the test tools while ``make test`` syncs them."""
    src = tmp_path / "src"
    for name in (*FILES, "Dockerfile"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    mounts = ["-v", f"{src}:/src:ro"]
    if EXTRA_CAS.is_dir():
        mounts += ["-v", f"{EXTRA_CAS}:{EXTRA_CAS}:ro"]
    done = subprocess.run(
        ["docker", "run", "--rm", *mounts, DEBIAN, "bash", "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "pip: absent" in out and "uv on PATH before" not in out
    version = subprocess.run(
        [str(REPO / "scripts" / "install-uv.sh"), "--version"], capture_output=True, text=True
    ).stdout.strip()
    assert f"uv: uv {version} " in out, out
    assert "installing uv" in done.stderr and done.stderr.count("installing uv") == 1
    run = out[out.index("run:") : out.index("test:")]
    test = out[out.index("test:") :]
    assert "sync --frozen --no-dev --inexact\n" in run, run
    assert "run --frozen --no-sync python scripts/stack.py run" in run, run
    assert "sync --frozen --all-packages --extra dashboard\n" in test, test
    assert "--no-dev" not in test, test


# The README's ``make start`` (``make run`` in the background), then a wait for the loop to spend
# three SnakeLab runs (the seeding run and two proposals), the report page, and ``make stop``.
# tpe proposes (no model server here), on the reference SnakeLab's 1 s surrogate runs.
RUN_SCRIPT = r"""
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends python3 make ca-certificates >/dev/null
update-ca-certificates >/dev/null 2>&1
cp -r /src /work && cd /work
export AX3L_PROPOSER=tpe SNAKELAB_TRAINER=surrogate SNAKELAB_SURROGATE_SECONDS=1
make start
python3 - <<'PY'
import json, time, urllib.request
deadline = time.monotonic() + 300
runs = None
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen("http://127.0.0.1:28871/api/status", timeout=5) as r:
            runs = json.load(r).get("snakelab_runs")
    except OSError:
        runs = None
    if runs is not None and runs >= 3:
        break
    time.sleep(2)
print("snakelab_runs:", runs)
with urllib.request.urlopen("http://127.0.0.1:28870/", timeout=30) as r:
    print("reports:", r.status, len(r.read()))
PY
make status || true
.venv/bin/python -c "import pytest" 2>/dev/null && echo "pytest: installed" || echo "pytest: absent"
make stop
echo "stopped"
"""


def test_make_run_works_on_a_stock_debian_12(base_images, tmp_path: Path, timings: Timings):
    """From a copy of the repository's tracked files in a fresh Debian 12 container (Debian's
    python3 and make, nothing else), the README's ``make start`` installs what running needs
    (uv, the packages without the test tools, MariaDB from Debian), starts the stack, and the
    loop spends SnakeLab runs; the report page answers, and ``make stop`` stops it all."""
    src = tmp_path / "src"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        path = REPO / name
        if path.is_file() and not path.is_symlink():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / name)
    mounts = ["-v", f"{src}:/src:ro"]
    if EXTRA_CAS.is_dir():
        # uv trusts its own roots unless told of the system's bundle (with the CAs above).
        mounts += ["-v", f"{EXTRA_CAS}:{EXTRA_CAS}:ro"]
        mounts += ["-e", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"]
    began = time.monotonic()
    done = subprocess.run(
        ["docker", "run", "--rm", *mounts, DEBIAN, "bash", "-c", RUN_SCRIPT],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    timings["make start on stock Debian 12"] = time.monotonic() - began
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-4000:]
    runs = out.split("snakelab_runs:", 1)[1].split()[0]
    assert runs != "None" and int(runs) >= 3, out[-4000:]
    assert "reports: 200" in out, out[-4000:]
    assert "pytest: absent" in out, out[-4000:]
    assert "stopped" in out
