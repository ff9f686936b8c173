"""The one free-port helper."""

from __future__ import annotations

import os
import socket
import time

from ax3l.shared.ports import free_port
from ax3l.testing import plugin


def test_a_free_port_can_be_bound_at_once() -> None:
    """The port free_port names is free: a listener binds it on 127.0.0.1 without an error."""
    port = free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        assert listener.getsockname()[1] == port


def test_the_test_plugin_hands_out_the_same_helper() -> None:
    """Tests import free_port from the plugin; it is the product helper, not a second copy."""
    assert plugin.free_port is free_port


def test_ports_come_from_below_the_ephemeral_range_and_never_twice() -> None:
    """Outgoing connections take their source ports from the ephemeral range, so a port picked
    there can be taken before the child binds it: free_port draws below it, skips the project's
    own default ports, and never repeats a port within a process."""
    from ax3l.shared import ports

    low = int(ports.EPHEMERAL_RANGE.read_text().split()[0])
    picked = [free_port() for _ in range(300)]
    assert len(set(picked)) == len(picked)
    assert all(ports.LOWEST <= port < low for port in picked)
    assert not any(port in reserved for port in picked for reserved in ports.RESERVED)


def test_a_port_someone_listens_on_is_never_handed_out(monkeypatch, tmp_path) -> None:
    """A port that is taken is skipped: with the draw forced onto a listening port first, the
    next free one is returned instead."""
    from ax3l.shared import ports

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        draws = iter([busy, busy, 12345])
        monkeypatch.setattr(ports._random, "randint", lambda a, b: next(draws))
        monkeypatch.setattr(ports, "LOWEST", 1024)
        monkeypatch.setattr(ports, "_candidates_below", lambda: 65536)
        monkeypatch.setattr(ports, "CLAIMS", tmp_path / "claims")
        ports._given.discard(12345)
        assert free_port() == 12345


def test_two_processes_never_hand_out_the_same_port(tmp_path) -> None:
    """Two processes (the suite's two workers, say) drawing from the same 1,200 ports at once hand
    out 300 ports between them, none twice: each claims its port in the shared file."""
    import subprocess
    import sys

    draw = (
        "from ax3l.shared import ports\n"
        "ports.LOWEST = 20000\n"
        "ports._candidates_below = lambda: 21200\n"
        "print(' '.join(str(ports.free_port()) for _ in range(150)))\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    children = [
        subprocess.Popen([sys.executable, "-c", draw], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    picked = [int(port) for child in children for port in child.communicate(timeout=60)[0].split()]
    assert all(child.returncode == 0 for child in children)
    assert len(picked) == 300
    assert len(set(picked)) == 300
    assert all(20000 <= port < 21200 for port in picked)
    assert (tmp_path / f"ax3l-ports-{os.getuid()}.claims").exists()


def test_a_claim_lapses_after_its_time(monkeypatch, tmp_path) -> None:
    """A port claimed by another process is refused while its claim lives and claimable after."""
    from ax3l.shared import ports

    monkeypatch.setattr(ports, "CLAIMS", tmp_path / "claims")
    now = [1000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    assert ports._claimed(20001)
    assert not ports._claimed(20001)
    now[0] += ports.CLAIM_SECONDS + 1
    assert ports._claimed(20001)
    expiry = now[0] + ports.CLAIM_SECONDS
    assert (tmp_path / "claims").read_text().split() == ["20001", f"{expiry:.3f}"]


def test_a_planted_claims_file_is_never_written(monkeypatch, tmp_path) -> None:
    """The claims file sits in a folder every user shares. A symbolic link or a second hard link
    planted in its place (pointing at a file of the victim's) and a file another user owns are
    left untouched, and free_port still hands out ports, unclaimed."""
    from ax3l.shared import ports

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    claims = tmp_path / "claims"
    monkeypatch.setattr(ports, "CLAIMS", claims)
    claims.symlink_to(victim)
    assert ports._claimed(20001) and ports._claimed(20001)
    claims.unlink()
    os.link(victim, claims)
    assert ports._claimed(20001) and ports._claimed(20001)
    assert victim.read_text() == "precious\n"
    claims.unlink()
    if os.geteuid() == 0:  # only root can give a file to another user
        claims.write_text("")
        os.chown(claims, 65534, 65534)
        assert ports._claimed(20001) and ports._claimed(20001)
        assert claims.read_text() == ""
    assert free_port() > 0
