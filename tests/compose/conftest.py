"""The compose tier: the README's ``docker compose up`` run for real on a Docker engine.

Needs root (it starts ``dockerd`` when none answers, and it crashes a container the way the
kernel would, by SIGKILL of its main process from the host), Debian's ``docker.io`` and
``docker-compose``. Base images come from the registries, or from
``scripts/docker-standins.sh`` where those cannot be reached. Run by ``make test-compose``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compose_harness import REPO, Timings

from ax3l.testing.plugin import wait_until


def _docker_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


@pytest.fixture(scope="session")
def output_dir() -> Path:
    root = Path(os.environ.get("AX3L_TEST_OUTPUT", REPO / "test-output")) / "compose"
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture(scope="session")
def docker_engine(output_dir: Path) -> None:
    """A Docker engine that answers: the running one, else ``dockerd`` started here."""
    if shutil.which("docker") is None:
        pytest.fail("the docker client is not installed (apt-get install docker.io)")
    if _docker_answers():
        return
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.fail("no Docker engine answers and dockerd cannot be started here")
    # Left running on purpose: the engine outlives the tests (as it does on a user's machine).
    # A shell starts it in the background and exits, so this process holds neither a child
    # nor the log's descriptor (pytest reports either as an unraisable ResourceWarning).
    log = output_dir / "dockerd.log"
    subprocess.run(
        ["sh", "-c", 'setsid dockerd >>"$1" 2>&1 </dev/null &', "sh", str(log)], check=True
    )
    wait_until(_docker_answers, timeout=60, interval=0.5, what="dockerd to answer")


@pytest.fixture(scope="session")
def timings(output_dir: Path) -> Iterator[Timings]:
    figures = Timings()
    yield figures
    (output_dir / "timings.json").write_text(json.dumps(figures.values, indent=2) + "\n")
    print("\ncompose timings (s):", json.dumps(figures.values))


@pytest.fixture(scope="session")
def base_images(docker_engine: None, timings: Timings) -> None:
    """The base images: real ones when pulled, else the stand-ins (llama's only if cached)."""
    args = [str(REPO / "scripts" / "docker-standins.sh")]
    cached = subprocess.run([str(REPO / "scripts" / "llama-server.sh"), "cached"])
    if cached.returncode == 0:
        args.append("--llama")
    began = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    timings["base images"] = time.monotonic() - began
