"""``make``'s first step on a stock Debian 12, as the issue that found it tried it: a container
of Debian 12 with Debian's own ``python3`` (no pip, PEP 668) and ``make``, nothing else."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from compose_harness import REPO

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
    uv`` installs the Dockerfiles' uv version into ~/.cache/ax3l (a second ``make uv`` does
    nothing), and ``make run`` syncs without the test tools while ``make test`` syncs them."""
    src = tmp_path / "src"
    for name in (*FILES, *(str(p.relative_to(REPO)) for p in REPO.glob("services/*/Dockerfile"))):
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
    assert "sync --frozen --all-packages --no-dev --inexact" in run, run
    assert "run --frozen --no-sync python scripts/stack.py run" in run, run
    assert "sync --frozen --all-packages --extra dashboard\n" in test, test
    assert "--no-dev" not in test, test
