"""The one free-port helper."""

from __future__ import annotations

import socket

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


def test_a_port_someone_listens_on_is_never_handed_out(monkeypatch) -> None:
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
        ports._given.discard(12345)
        assert free_port() == 12345
