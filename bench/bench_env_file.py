"""Reading a ``KEY=value`` settings file (``ax3l.shared.env_files.read_env_file``): what
``make run``, ``ax3l-compare --db-env`` and the test plugin do once per process with
``.run/db.env``. Prints the median time of one read of a file shaped like the one
``scripts/mariadb.sh`` writes (19 variables and a comment), over rounds of reads, and the
same with python-dotenv's ``dotenv_values`` (no expansion) for comparison.

    .venv/bin/python bench/bench_env_file.py            # 20 rounds of 500 reads
    .venv/bin/python bench/bench_env_file.py --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from functools import partial
from pathlib import Path

from dotenv import dotenv_values

from ax3l.shared.env_files import read_env_file
from ax3l.testing.timing import per_call

KEYS = (
    "DB_HOST", "DB_PORT", "DB_USER", "DB_PASSWORD", "DB_SOCKET", "AX3L_DB_NAME",
    "AX3L_SNAKELAB_DB_NAME", "SNAKELAB_DB_HOST", "SNAKELAB_DB_PORT", "SNAKELAB_DB_USER",
    "SNAKELAB_DB_PASSWORD", "SNAKELAB_DB_NAME", "AX3L_REPORTS_DB_USER",
    "AX3L_REPORTS_DB_PASSWORD", "AX3L_SEATS_DB_USER", "AX3L_SEATS_DB_PASSWORD",
    "AX3L_DB_ADMIN_USER", "AX3L_DB_ADMIN_PASSWORD", "AX3L_DEV_DB_PORT",
)  # fmt: skip


def dotenv_file(path: Path) -> dict[str, str | None]:
    return dotenv_values(path, interpolate=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--reads", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "db.env"
        lines = ["# Written by scripts/mariadb.sh: the private MariaDB of this checkout."]
        lines += [f"{key}=Ab3dE6gH9jK2mN5pQ8sT" for key in KEYS]
        path.write_text("\n".join(lines) + "\n")
        assert read_env_file(path) == dotenv_values(path, interpolate=False)
        for name, read in (("read_env_file", read_env_file), ("  dotenv_values", dotenv_file)):
            per_read = per_call(partial(read, path), args.rounds, args.reads)
            print(
                f"{name}, {len(KEYS)} variables: median {statistics.median(per_read) * 1e6:.1f}"
                f" us a read, best {min(per_read) * 1e6:.1f} us"
                f" ({args.rounds} rounds of {args.reads})"
            )


if __name__ == "__main__":
    main()
