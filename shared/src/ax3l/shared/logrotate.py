"""Size-bounded log files with a few generations kept, for logs other processes write to.

``make run``'s services write their output straight into ``<run dir>/logs/<service>.log`` (the
file is their stdout and stderr, opened for appending), so neither they nor the supervisor can
reopen it the way ``logging.handlers.RotatingFileHandler`` does. ``LogRotation.rotate`` is
logrotate's ``copytruncate`` instead: once a log reaches ``max_bytes`` the older generations
move up (``.1`` to ``.2``, ...; the one past ``keep`` is deleted), the log is copied to ``.1``
and then truncated in place. A process appending to it (``O_APPEND``) goes on writing at the
new end, so the live log starts again from zero and the process never notices. Output written
in the few microseconds between the copy's last read and the truncation is lost: the copy is
repeated until the size stays put, so only a write landing exactly then is.

The supervisor of ``ax3l.shared.stack.supervisor`` calls ``rotate`` on each service's log
between its looks at the services; a log is thus at most ``max_bytes`` plus what its service
writes between two looks. Standard library only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

COPY_CHUNK = 1 << 20


def generation(path: Path, number: int) -> Path:
    """``<path>.<number>``: the ``number``-th older generation of ``path``."""
    return path.with_name(f"{path.name}.{number}")


@dataclass(frozen=True)
class LogRotation:
    """Rotate a log once it reaches ``max_bytes``, keeping ``keep`` older generations (0: the
    log is only truncated)."""

    max_bytes: int
    keep: int

    def __post_init__(self) -> None:
        if self.max_bytes < 1:
            raise ValueError(f"a log's size bound must be at least 1 byte, not {self.max_bytes}")
        if self.keep < 0:
            raise ValueError(f"generations to keep must be 0 or more, not {self.keep}")

    def rotate(self, path: Path) -> bool:
        """Rotate ``path`` if it has reached the bound; True when it did. A missing log is
        left alone."""
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return False
        if size < self.max_bytes:
            return False
        self._shift(path)
        with path.open("r+b") as log:
            if self.keep:
                with generation(path, 1).open("wb") as copy:
                    _copy_until_still(log, copy)
            log.truncate(0)
        return True

    def _shift(self, path: Path) -> None:
        """Move each older generation up by one; the one past ``keep`` goes."""
        if not self.keep:
            return
        generation(path, self.keep).unlink(missing_ok=True)
        for number in range(self.keep - 1, 0, -1):
            older = generation(path, number)
            if older.exists():
                os.replace(older, generation(path, number + 1))


def _copy_until_still(src: BinaryIO, dst: BinaryIO) -> None:
    """Copy ``src`` (from its start) to ``dst`` until no more was appended meanwhile."""
    while True:
        chunk = src.read(COPY_CHUNK)
        if chunk:
            dst.write(chunk)
            continue
        if os.fstat(src.fileno()).st_size <= src.tell():
            dst.flush()
            return


def rotate_all(rotation: LogRotation | None, paths: list[Path | None]) -> list[Path]:
    """``rotation.rotate`` each of ``paths`` (None: none); the ones rotated."""
    if rotation is None:
        return []
    return [path for path in paths if path is not None and rotation.rotate(path)]
