"""MCP children forked from a pre-imported parent, and the client transport that talks to them.

A new interpreter importing the MCP SDK costs about a second of CPU per conversation. With
``AX3L_MCP_SPAWN=fork`` (the default) the orchestrator starts one *zygote*
(``python -m ax3l.app.snakelab.tools.zygote``, see its module for the protocol) with the
children's environment minus the binding, and asks it for each conversation's child: it sends
the entry and one end of a fresh socket pair, the zygote forks, and the child serves MCP on
that socket as its stdin and stdout. A child starts in a few milliseconds and is still a
process of its own, bound to its entry, which exits when the orchestrator closes its end.

``forked_stdio`` is the MCP client transport for such a child: newline-delimited JSON-RPC,
as the SDK's ``stdio_client``, over the socket. Closing it shuts the socket for writing (the
child reads end of file and exits), waits for the child through its pidfd and kills it if it
does not go within ``EXIT_TIMEOUT``. The pidfd comes from the zygote with the pid: it opens it
right after the fork, before the child could be reaped, so no pid reuse can point it at
another process; where pidfds are refused the child is watched by its pid.

A zygote that died (killed, or its machine's memory ran out) is started again on the next
request; one that cannot start makes the session fail like a child that cannot be spawned.
Nothing of it is state: a restarted orchestrator starts a new zygote, and the old one exits
when its control socket closes with the old orchestrator.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress

import anyio
from mcp import types
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

ZYGOTE_MODULE = "ax3l.app.snakelab.tools.zygote"
# Seconds the zygote has to import and warm up, and to answer one fork request.
START_TIMEOUT = 30.0
REQUEST_TIMEOUT = 5.0
# Seconds a child has to exit after its socket is shut before it is killed.
EXIT_TIMEOUT = 2.0
EXIT_POLL = 0.01  # where there are no pidfds
# Whether to watch children through the pidfds the zygote sends (tests turn it off to check
# the pid-watching path of kernels and seccomp profiles without pidfds).
PIDFDS = True
# The longest JSON-RPC line read from a child (tool listings are a few KiB).
LINE_LIMIT = 16 * 1024 * 1024


class ForkFailed(OSError):
    """The zygote could not be started or did not fork the child."""


class Zygote:
    """One zygote process with the environment its children get (apart from their binding)."""

    def __init__(self, env: Mapping[str, str]):
        self.env = dict(env)
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", ZYGOTE_MODULE, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT)
        try:
            reply = self._reply(ours)
        except BaseException:
            ours.close()
            self._stop_process()
            raise
        if not reply.get("ready"):
            ours.close()
            self._stop_process()
            raise ForkFailed(f"the MCP zygote did not start: {reply.get('error', reply)}")
        ours.settimeout(REQUEST_TIMEOUT)
        self._control = ours
        return ours

    @staticmethod
    def _reply(control: socket.socket) -> dict[str, object]:
        reply, fds = Zygote._reply_fds(control)
        for fd in fds:
            os.close(fd)
        return reply

    @staticmethod
    def _reply_fds(control: socket.socket) -> tuple[dict[str, object], list[int]]:
        """The zygote's next message and the descriptors it carries (the caller's to close)."""
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, 4096, 1)
        except TimeoutError as exc:
            raise ForkFailed("the MCP zygote did not answer in time") from exc
        try:
            reply = json.loads(data) if data else None
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            for fd in fds:
                os.close(fd)
            answered = f"answered {data!r}" if data else "exited"
            raise ForkFailed(f"the MCP zygote {answered}")
        return reply, fds

    def fork(self, parameter: str) -> tuple[socket.socket, int, int | None]:
        """A child bound to ``parameter``: our end of its stdio socket, its pid and its pidfd
        (None where the zygote could not open one) (blocking)."""
        with self._lock:
            for attempt in (1, 2):
                control = self._control or self._start()
                ours, theirs = socket.socketpair()
                try:
                    request = json.dumps({"parameter": parameter}).encode()
                    socket.send_fds(control, [request], [theirs.fileno()])
                    reply, fds = self._reply_fds(control)
                except (OSError, ValueError) as exc:
                    ours.close()
                    self._forget()
                    if attempt == 2:
                        raise ForkFailed(f"the MCP zygote failed: {exc}") from exc
                    continue  # a zygote that died since the last request: start a new one
                finally:
                    theirs.close()
                pid = reply.get("pid")
                if not isinstance(pid, int):
                    ours.close()
                    for fd in fds:
                        os.close(fd)
                    raise ForkFailed(f"the MCP zygote refused: {reply.get('error', reply)}")
                pidfd = fds[0] if fds else None
                if pidfd is not None and not PIDFDS:
                    os.close(pidfd)
                    pidfd = None
                return ours, pid, pidfd
        raise AssertionError("unreachable")

    def _forget(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        self._stop_process()

    def _stop_process(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def close(self) -> None:
        """Close the control socket (the zygote exits) and reap it; its children live on
        until their own sockets close."""
        with self._lock:
            self._forget()


_zygotes: dict[tuple[tuple[str, str], ...], Zygote] = {}
_zygotes_lock = threading.Lock()


def zygote_for(env: Mapping[str, str]) -> Zygote:
    """The process's zygote for children with environment ``env`` (one per distinct env)."""
    key = tuple(sorted(env.items()))
    with _zygotes_lock:
        zygote = _zygotes.get(key)
        if zygote is None:
            zygote = _zygotes[key] = Zygote(env)
        return zygote


@atexit.register
def close_zygotes() -> None:
    """Stop every zygote of this process (at exit, and for tests)."""
    with _zygotes_lock:
        zygotes = list(_zygotes.values())
        _zygotes.clear()
    for zygote in zygotes:
        zygote.close()


def _parse_line(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


@asynccontextmanager
async def forked_stdio(zygote: Zygote, parameter: str) -> AsyncIterator[TransportStreams]:
    """The MCP client transport of one forked child bound to ``parameter``."""
    sock, pid, pidfd = await asyncio.to_thread(zygote.fork, parameter)
    child = _Child(pid, pidfd)
    try:
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=LINE_LIMIT)
    except BaseException:
        sock.close()
        child.forget()
        raise
    read_in, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_lines() -> None:
        async with read_in:
            with suppress(OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
                while line := await reader.readline():
                    if not line.endswith(b"\n"):
                        return  # a partial line at end of file: the child died mid-write
                    await read_in.send(_parse_line(line))

    async def write_lines() -> None:
        async with write_out:
            try:
                async for message in write_out:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    writer.write(text.encode() + b"\n")
                    await writer.drain()
            except OSError:
                await read_in.aclose()  # the child is gone: let the session see it

    async with anyio.create_task_group() as group:
        group.start_soon(read_lines)
        group.start_soon(write_lines)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                write_stream.close()
                await _stop_child(writer, child)
                read_stream.close()
            group.cancel_scope.cancel()


class _Child:
    """A forked child, watched through the pidfd the zygote opened for it (no pid reuse can
    fool it), or by its pid where the kernel or a container's seccomp profile refuses
    ``pidfd_open`` (the zygote reaps its children at once)."""

    def __init__(self, pid: int, pidfd: int | None):
        self.pid = pid
        self.pidfd = pidfd
        self.gone = False

    def exited(self) -> bool:
        if self.gone or self.pidfd is not None:
            return self.gone
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            self.gone = True
        return self.gone

    async def wait(self) -> bool:
        """Whether the child exits within ``EXIT_TIMEOUT`` seconds."""
        if self.pidfd is None:
            for _ in range(round(EXIT_TIMEOUT / EXIT_POLL)):
                if self.exited():
                    return True
                await asyncio.sleep(EXIT_POLL)
            return self.exited()
        loop = asyncio.get_running_loop()
        gone = asyncio.Event()
        loop.add_reader(self.pidfd, gone.set)
        try:
            await asyncio.wait_for(gone.wait(), EXIT_TIMEOUT)
        except TimeoutError:
            return False
        finally:
            loop.remove_reader(self.pidfd)
        self.gone = True
        return True

    def kill(self) -> None:
        with suppress(ProcessLookupError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            elif not self.exited():
                os.kill(self.pid, signal.SIGKILL)

    def forget(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
            self.gone = True


async def _stop_child(writer: asyncio.StreamWriter, child: _Child) -> None:
    """Shut the child's stdin, wait for it to exit, kill it when it does not."""
    with suppress(OSError):
        writer.write_eof()
    try:
        if not await child.wait():
            child.kill()
            await child.wait()
    finally:
        child.forget()
        writer.close()
        with suppress(OSError):
            await writer.wait_closed()
