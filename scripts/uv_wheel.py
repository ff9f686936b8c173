#!/usr/bin/env python3
"""uv's binaries from PyPI with nothing but Python's standard library (no pip, no venv).

    scripts/uv_wheel.py VERSION CACHE_DIR              # prints the cached wheel's path
    scripts/uv_wheel.py VERSION CACHE_DIR --extract DIR  # and puts uv and uvx into DIR

The wheel is PyPI's manylinux wheel of uv for this machine's architecture (the one pip picks on
a glibc machine), found through the JSON simple index (PEP 691), its sha256 checked against the
index, and kept in CACHE_DIR, so a second call downloads nothing. Debian 12's own python3 has
no pip, and PEP 668 forbids pip into the system Python: this is how ``make`` installs uv there
(``scripts/install-uv.sh``), and how ``scripts/docker-standins.sh`` builds its uv image.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import urllib.request
import zipfile
from pathlib import Path

INDEX = "https://pypi.org/simple/uv/"
BINARIES = ("uv", "uvx")


def wheel(version: str, cache: Path) -> Path:
    """The cached wheel of uv ``version`` for this architecture, downloaded once."""
    arch = platform.machine()
    prefix, suffix = f"uv-{version}-py3-none-manylinux", f"_{arch}.whl"
    cache.mkdir(parents=True, exist_ok=True)
    cached = sorted(p for p in cache.glob(f"{prefix}*{suffix}"))
    if cached:
        return cached[0]
    print(f"uv_wheel: downloading uv {version} for {arch} from PyPI", file=sys.stderr)
    request = urllib.request.Request(
        INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        files = json.load(answer)["files"]
    found = [
        f for f in files if f["filename"].startswith(prefix) and f["filename"].endswith(suffix)
    ]
    if not found:
        sys.exit(f"uv_wheel: PyPI has no manylinux {arch} wheel of uv {version}")
    wanted = found[0]
    with urllib.request.urlopen(wanted["url"], timeout=300) as answer:
        data = answer.read()
    if hashlib.sha256(data).hexdigest() != wanted["hashes"]["sha256"]:
        sys.exit(f"uv_wheel: {wanted['filename']}: sha256 mismatch")
    partial = cache / (wanted["filename"] + ".part")
    partial.write_bytes(data)
    return partial.rename(cache / wanted["filename"])


def extract(path: Path, target: Path) -> None:
    """uv and uvx out of the wheel (its ``*.data/scripts/``) into ``target``, executable."""
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            base = name.rsplit("/", 1)[-1]
            if name.split("/")[-2:-1] == ["scripts"] and base in BINARIES:
                partial = target / f".{base}.part"
                partial.write_bytes(archive.read(name))
                partial.chmod(0o755)
                partial.rename(target / base)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--extract"):
        print(__doc__, file=sys.stderr)
        return 2
    path = wheel(argv[0], Path(argv[1]))
    if len(argv) == 4:
        extract(path, Path(argv[3]))
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
