"""Forked MCP sessions: a dead zygote is replaced, a child that will not exit is killed, and a
zygote that cannot start fails the session with its reason."""

from __future__ import annotations

import os
import signal

import pytest

from ax3l.orchestrator import mcp_fork
from ax3l.orchestrator.mcp_fork import close_zygotes
from ax3l.orchestrator.mcp_session import ToolSessionFailed, bound_session
from ax3l.shared.registry import BY_NAME
from ax3l.shared.settings import Settings
from ax3l.shared.waiting import wait_until_async
from ax3l.testing.mcp_children import mcp_children, zygotes_of
from ax3l.testing.plugin import free_port


@pytest.fixture
def settings() -> Settings:
    return Settings(AX3L_ZMQ_ENDPOINT=f"tcp://127.0.0.1:{free_port()}", AX3L_MCP_SPAWN="fork")


@pytest.fixture(autouse=True)
def no_zygote_left():
    close_zygotes()  # earlier tests' (their sessions are closed; their zygotes wait for more)
    yield
    close_zygotes()
    assert zygotes_of(os.getpid()) == set()


async def test_a_killed_zygote_is_replaced_by_the_next_session(settings):
    """SIGKILL of the zygote between two conversations: the second still gets its session,
    from a new zygote, and is bound to its own entry."""
    async with bound_session(BY_NAME["gamma"], settings) as session:
        assert "gamma" in mcp_children(os.getpid()).values()
        (first,) = zygotes_of(os.getpid(), settings.zmq_endpoint)
    assert session.close_seconds is not None
    os.kill(first, signal.SIGKILL)
    async with bound_session(BY_NAME["batch_size"], settings) as session:
        assert session.tool.name == "submit_single_value"
        assert "for batch_size, the parameter assigned" in session.tool.description
        (second,) = zygotes_of(os.getpid(), settings.zmq_endpoint)
    assert second != first


@pytest.mark.parametrize("pidfds", [True, False])
async def test_a_child_that_does_not_exit_is_killed_when_its_session_closes(
    settings, monkeypatch, pidfds
):
    """A stopped child cannot read its end of file: the session kills it and leaves nothing,
    also where pidfds are refused (a container's seccomp profile) and the pid is watched."""
    if not pidfds:  # the zygote's pidfd is dropped: the child is watched by its pid
        monkeypatch.setattr(mcp_fork, "PIDFDS", False)
    async with bound_session(BY_NAME["epsilon_pair"], settings):
        ((pid, name),) = mcp_children(os.getpid()).items()
        assert name == "epsilon_pair"
        os.kill(pid, signal.SIGSTOP)
    await wait_until_async(lambda: not mcp_children(os.getpid()), 10, "the stopped child gone")


async def test_a_zygote_that_cannot_start_fails_the_session_with_its_reason(tmp_path):
    """A broken schema file: the session fails naming the file, no process is left."""
    settings = Settings(
        AX3L_ZMQ_ENDPOINT=f"tcp://127.0.0.1:{free_port()}",
        AX3L_MCP_SPAWN="fork",
        AX3L_SCHEMA_PATH=str(tmp_path / "missing.json"),
    )
    with pytest.raises(ToolSessionFailed, match=r"missing\.json"):
        async with bound_session(BY_NAME["gamma"], settings):
            pass
    assert not mcp_children(os.getpid())
