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
