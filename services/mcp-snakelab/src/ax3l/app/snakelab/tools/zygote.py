"""A pre-imported parent that forks one MCP stdio server per conversation.

Starting the server with ``python -m ax3l.app.snakelab.tools`` costs about a second of CPU,
nearly all of it importing the MCP SDK and pydantic. The zygote pays that once: it imports the
server, loads the schema and builds (and drops) one server to warm pydantic, then waits on
its control socket. For each conversation the orchestrator sends the entry to bind and one
end of a fresh socket pair (``SCM_RIGHTS``); the zygote forks, and the child makes that
socket its stdin and stdout, sets ``AX3L_CONVERSATION_PARAMETER`` and runs exactly the server
``python -m`` would have run. So every conversation still has a process of its own, bound to
its entry (which is also its process name), and it exits when its stdin closes.

    python -m ax3l.app.snakelab.tools.zygote CONTROL_FD

Protocol on the control socket (``AF_UNIX``, ``SOCK_SEQPACKET``, one message a datagram):

* zygote -> client, once: ``{"ready": true, "pid": <zygote pid>}`` (or ``{"error": ...}``
  and exit 2 when the schema file cannot be read).
* client -> zygote: ``{"parameter": <entry name>}`` with exactly one descriptor attached;
  zygote -> client: ``{"pid": <child pid>}`` with the child's pidfd attached (none where the
  kernel or a seccomp profile refuses ``pidfd_open``), or ``{"error": <reason>}`` for any
  malformed request (without a descriptor, not JSON, nested too deep, of more than
  ``MAX_REQUEST`` bytes, ...); the zygote serves on after every one.
* End of file on the control socket (the orchestrator exited or closed it): the zygote
  exits; its children live on until their own stdin closes.

The zygote is single-threaded and forks only from its main loop, with no event loop and no
ZeroMQ context yet created (each child makes its own). Children are reaped by a ``SIGCHLD``
handler, so a finished conversation leaves no zombie; ``SIGCHLD`` is blocked from the fork
until the child's pidfd is open, so the pidfd is opened before the child could be reaped and
its pid reused, and the client never opens one from a pid.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import zmq.asyncio

from ax3l.app.snakelab.tools.binding import BINDING_ENV, Binding
from ax3l.app.snakelab.tools.server import build_server, main
from ax3l.shared.config_schema import SchemaFileError, cached_schema
from ax3l.shared.settings import mcp_server_settings
from ax3l.shared.tool_channel import ZMQClient, client_endpoint

MAX_REQUEST = 4096
# Linux keeps 15 bytes of a process name; every entry name fits.
COMM_LENGTH = 15


def _warm() -> None:
    """Import and build everything a child needs once, so the children inherit it."""
    settings = mcp_server_settings()
    schema = cached_schema(settings.schema_file())
    # A throwaway server warms pydantic's schema builders for the tool signatures. Its
    # ZeroMQ context is private and terminated (its I/O threads joined) before any fork.
    context = zmq.asyncio.Context()
    try:
        build_server(Binding(None, ""), schema, ZMQClient(client_endpoint(settings), 1.0, context))
    finally:
        context.term()


def _send(control: socket.socket, message: dict[str, object], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(control, [data], fds)
    else:
        control.send(data)


def _reap(_signum: int = 0, _frame: object = None) -> None:
    """Reap every child that has exited (the ``SIGCHLD`` handler)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _pidfd(pid: int) -> int | None:
    """The child's pidfd (its exit is not reaped yet: ``SIGCHLD`` is blocked), or None where
    pidfds are refused."""
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _child(control: socket.socket, stream_fd: int, parameter: str) -> None:
    """In the forked child: become the bound stdio server, never return."""
    code = 1
    try:
        control.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        os.dup2(stream_fd, 0)
        os.dup2(stream_fd, 1)
        os.close(stream_fd)
        os.environ[BINDING_ENV] = parameter
        # The process name shows the binding (ps, /proc/PID/comm), as the environment of
        # an exec'd child would: the environment a forked child shows is the zygote's.
        with contextlib.suppress(OSError):
            Path("/proc/self/comm").write_text(parameter[:COMM_LENGTH])
        code = main()
    except BaseException:  # whatever happened, the child must not return into the loop
        logging.getLogger("ax3l.mcp_snakelab").exception("the forked MCP server failed")
    finally:
        sys.stdout.flush()
        os._exit(code)


def _request(data: bytes, fds: list[int]) -> tuple[str | None, str | None]:
    """The parameter asked for, or the reason the request is refused."""
    if len(fds) != 1:
        return None, f"a request carries exactly one descriptor, not {len(fds)}"
    if len(data) > MAX_REQUEST:
        return None, f"a request is at most {MAX_REQUEST} bytes"
    try:
        body = json.loads(data)
    except RecursionError:
        return None, "a request is a flat JSON object (this one is nested too deep)"
    except ValueError:
        return None, "a request is a JSON object"
    parameter = body.get("parameter") if isinstance(body, dict) else None
    if not isinstance(parameter, str):
        return None, 'a request is {"parameter": <entry name>}'
    return parameter, None


def serve(control: socket.socket) -> int:
    """Answer fork requests until the control socket closes."""
    signal.signal(signal.SIGCHLD, _reap)
    _reap()
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_REQUEST + 1, 4)
        except InterruptedError:
            continue
        except OSError:
            return 0
        if not data and not fds:
            return 0  # end of file: the orchestrator is gone
        try:
            parameter, refusal = _request(data, fds)
        except Exception as exc:  # whatever a request holds, the zygote serves on
            parameter, refusal = None, f"a malformed request ({type(exc).__name__})"
        if refusal is not None or parameter is None:
            for fd in fds:
                os.close(fd)
            try:
                _send(control, {"error": refusal or "a malformed request"})
            except OSError:
                return 0
            continue
        try:
            _fork(control, fds[0], parameter)
        except OSError:
            return 0  # the control socket is gone


def _fork(control: socket.socket, stream_fd: int, parameter: str) -> None:
    """Fork the child for ``parameter`` and send its pid and pidfd."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    try:
        pid = os.fork()
        if pid == 0:
            _child(control, stream_fd, parameter)
        pidfd = _pidfd(pid)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    os.close(stream_fd)
    try:
        _send(control, {"pid": pid}, [pidfd] if pidfd is not None else None)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def run(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m ax3l.app.snakelab.tools.zygote CONTROL_FD", file=sys.stderr)
        return 2
    control = socket.socket(fileno=int(argv[0]))
    try:
        _warm()
    except SchemaFileError as exc:
        _send(control, {"error": f"ax3l-mcp-snakelab: {exc}"})
        return 2
    _send(control, {"ready": True, "pid": os.getpid()})
    return serve(control)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
