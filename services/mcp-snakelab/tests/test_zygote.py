"""The zygote: forks bound stdio servers on request, refuses malformed requests, and exits
when its control socket closes while its children serve on."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ax3l.shared.waiting import wait_until
from ax3l.testing.mcp_wire import INITIALIZED, call_tool, initialize
from ax3l.testing.zmq_peer import ScriptedPeer, broker_reply


class Zygote:
    """A real zygote process and our end of its control socket."""

    def __init__(self, env: dict[str, str], stderr: Path):
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control.settimeout(30)
        with stderr.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ax3l.app.snakelab.tools.zygote", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        theirs.close()

    def reply(self) -> dict[str, object]:
        return json.loads(self.control.recv(4096))

    def request(self, data: bytes, fds: list[int]) -> dict[str, object]:
        socket.send_fds(self.control, [data], fds)
        return self.reply()

    def fork(self, parameter: str) -> tuple[socket.socket, int]:
        ours, theirs = socket.socketpair()
        answer = self.request(json.dumps({"parameter": parameter}).encode(), [theirs.fileno()])
        theirs.close()
        pid = answer.get("pid")
        assert isinstance(pid, int), answer
        ours.settimeout(20)
        return ours, pid


@pytest.fixture
def broker() -> Iterator[ScriptedPeer]:
    peer = ScriptedPeer(lambda request: broker_reply(request, {"status": "ok", "run_id": "r1"}))
    yield peer
    peer.close()


@pytest.fixture
def zygote(tmp_path: Path, broker: ScriptedPeer) -> Iterator[Zygote]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("AX3L_")}
    env["AX3L_ZMQ_ENDPOINT"] = broker.endpoint
    started = Zygote(env, tmp_path / "zygote.log")
    yield started
    started.control.close()
    started.process.wait(timeout=20)


def exchange(sock: socket.socket, *messages: dict[str, object]) -> list[dict[str, object]]:
    """Send ``messages`` and read one reply line per request among them."""
    for message in messages:
        sock.sendall((json.dumps(message) + "\n").encode())
    with sock.makefile("rb") as reader:
        return [json.loads(reader.readline()) for message in messages if "id" in message]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_forked_child_is_a_bound_server_named_after_its_entry(zygote, broker):
    """The child answers MCP on its socket, carries its binding into the tool call, shows the
    entry as its process name, and exits (reaped, no zombie) when its socket closes."""
    ready = zygote.reply()
    assert ready["ready"] is True and ready["pid"] == zygote.process.pid
    sock, pid = zygote.fork("gamma")
    comm = Path(f"/proc/{pid}/comm")
    wait_until(lambda: comm.read_text().strip() == "gamma", 10, "the child named after gamma")
    init, call = exchange(
        sock,
        initialize(),
        INITIALIZED,
        call_tool(2, "submit_single_value", {"value": 0.97}),
    )
    assert init["result"]["serverInfo"]["name"] == "ax3l-snakelab"
    assert json.loads(call["result"]["content"][0]["text"]) == {"status": "ok", "run_id": "r1"}
    (request,) = broker.requests
    assert request["payload"] == {"parameter": "gamma", "value": 0.97}
    sock.close()
    wait_until(lambda: gone(pid), 20, "the child to exit and be reaped")


@pytest.mark.parametrize(
    ("data", "with_fd", "reason"),
    [
        (b'{"parameter": "gamma"}', False, "exactly one descriptor"),
        (b"not json", True, "a JSON object"),
        (b'["gamma"]', True, '{"parameter"'),
        (b'{"parameter": 7}', True, '{"parameter"'),
        (b"x" * 5000, True, "at most 4096 bytes"),
        (b"[" * 2000 + b"]" * 2000, True, "nested too deep"),
        (b"[" * 1500 + b'{"parameter": "gamma"}' + b"]" * 1500, True, "nested too deep"),
        (b'{"parameter": "gamma"}', 2, "exactly one descriptor"),
        (b"\xff\xfe", True, "a JSON object"),
    ],
)
def test_malformed_requests_are_refused_and_the_zygote_serves_on(zygote, data, with_fd, reason):
    """Each malformed request gets an error, forks nothing, and the next request works."""
    zygote.reply()
    ours, theirs = socket.socketpair()
    extra = socket.socket() if with_fd == 2 else None
    fds = [theirs.fileno()] if with_fd else []
    if extra is not None:
        fds.append(extra.fileno())
    answer = zygote.request(data, fds)
    theirs.close()
    if extra is not None:
        extra.close()
    assert "pid" not in answer and reason in str(answer["error"])
    ours.settimeout(5)
    with ours:
        assert ours.recv(1) == b"", "a refused request's descriptor is closed, not served"
    sock, _pid = zygote.fork("epsilon_pair")
    (init,) = exchange(sock, initialize())
    assert "result" in init
    sock.close()


def test_the_pid_comes_with_the_childs_pidfd_and_exited_children_are_reaped(zygote):
    """Each fork's reply carries a pidfd of that very child (opened before it could be
    reaped); a child that exits is reaped, and the zygote serves on."""
    zygote.reply()
    for parameter in ("gamma", "batch_size", "gamma"):
        ours, theirs = socket.socketpair()
        request = json.dumps({"parameter": parameter}).encode()
        socket.send_fds(zygote.control, [request], [theirs.fileno()])
        theirs.close()
        data, fds, _flags, _addr = socket.recv_fds(zygote.control, 4096, 2)
        pid = json.loads(data)["pid"]
        assert len(fds) == 1
        (pidfd,) = fds
        try:
            fdinfo = Path(f"/proc/self/fdinfo/{pidfd}").read_text()
            assert f"Pid:\t{pid}\n" in fdinfo
            ours.close()  # end of file: the child exits
            readable = select.select([pidfd], [], [], 20)[0]
            assert readable == [pidfd], "the pidfd reports the child's exit"
        finally:
            os.close(pidfd)
        wait_until(lambda pid=pid: gone(pid), 20, "the exited child reaped")
    assert zygote.process.poll() is None


def test_closing_the_control_socket_ends_the_zygote_but_not_a_serving_child(zygote):
    """The orchestrator's exit closes the control socket: the zygote exits, while a child in
    a conversation serves until its own socket closes."""
    zygote.reply()
    sock, pid = zygote.fork("reward_pair")
    zygote.control.close()
    assert zygote.process.wait(timeout=20) == 0
    (init,) = exchange(sock, initialize())
    assert init["result"]["serverInfo"]["name"] == "ax3l-snakelab"
    sock.close()
    wait_until(lambda: gone(pid), 20, "the child to exit")


def test_a_schema_file_that_cannot_be_read_is_reported_on_the_control_socket(tmp_path):
    """The zygote does not start with a broken schema file: it says why and exits 2."""
    env = dict(os.environ, AX3L_SCHEMA_PATH=str(tmp_path / "missing.json"))
    broken = Zygote(env, tmp_path / "zygote.log")
    answer = broken.reply()
    assert "ready" not in answer and "missing.json" in str(answer["error"])
    assert broken.process.wait(timeout=20) == 2
    broken.control.close()
