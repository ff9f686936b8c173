"""Picking a TCP port for a child process: the one place product code and tests get one.

A port the kernel hands out for ``bind(port 0)`` comes from the ephemeral range, the same range
every outgoing connection (to MariaDB, to SnakeLab, between the services) takes its source port
from: between picking the port and the child binding it, such a connection can take it, and the
child fails with "address already in use". So the port is drawn below the ephemeral range and
away from the ports the project itself serves on, and never handed out twice by one process.

Other processes pick ports too (the test suite's workers, a second checkout's tests, two
``ax3l-compare`` runs): a port one of them has picked stays bindable until its child binds it.
So a port is also claimed in a file every process of this user shares (``CLAIMS``, under an
exclusive ``flock``) and no process hands out a port claimed in the last ``CLAIM_SECONDS``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import stat
import tempfile
import time
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10000
# The ports Ax3l, SnakeLab, llama-server and the private MariaDB serve on by default.
RESERVED = (range(27000, 30000), range(33000, 34000))
ATTEMPTS = 200
CLAIMS = Path(tempfile.gettempdir()) / f"ax3l-ports-{os.getuid()}.claims"
CLAIM_SECONDS = 120.0

_given: set[int] = set()
_random = random.SystemRandom()


def _candidates_below() -> int:
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return low


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _claimed(port: int) -> bool:
    """Claim ``port`` for this machine's processes; False if another claimed it lately.

    The file holds one ``port expiry`` line per live claim; expired lines are dropped on every
    claim, so it stays as small as the claims of the last ``CLAIM_SECONDS``. The folder is
    shared with other users: a symbolic link, a file with a second hard link or one another
    user owns is never opened for writing, and then, as where the file cannot be opened at all
    (a read-only temporary folder), every port counts as unclaimed."""
    now = time.time()
    try:
        fd = os.open(CLAIMS, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return True
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1 or found.st_uid != os.getuid():
        os.close(fd)
        return True
    with os.fdopen(fd, "r+") as claims:
        fcntl.flock(claims, fcntl.LOCK_EX)
        live: dict[int, float] = {}
        for line in claims:
            with contextlib.suppress(ValueError):  # a line no claim wrote
                other, expiry = line.split()
                if float(expiry) > now:
                    live[int(other)] = float(expiry)
        if port in live:
            return False
        live[port] = now + CLAIM_SECONDS
        claims.seek(0)
        claims.truncate()
        claims.write("".join(f"{p} {e:.3f}\n" for p, e in live.items()))
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the ephemeral range
    where the system can; one this process has not handed out before, and no other process of
    this user in the last ``CLAIM_SECONDS``."""
    high = _candidates_below() - 1
    if high - LOWEST > 1000:
        for _ in range(ATTEMPTS):
            port = _random.randint(LOWEST, high)
            if port in _given or any(port in r for r in RESERVED):
                continue
            if _bindable(port) and _claimed(port):
                _given.add(port)
                return port
    while True:  # no room below the ephemeral range: let the kernel choose
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _given and _claimed(port):
            _given.add(port)
            return port
