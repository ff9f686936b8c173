"""Several SnakeLab hosts sharing one ``snakelab`` database, behind the one client interface.

``AX3L_SNAKELAB_ENDPOINTS`` (a comma-separated list; unset: ``AX3L_SNAKELAB_ENDPOINT`` alone)
names the hosts. ``SnakeLabHosts`` is a ``SnakeLabClient``: every caller (the broker's
submissions, ``OnceSubmitter``, the run waiter) keeps its code, and each request goes to the
right host:

* ``simulation.submit`` goes to an idle host (``simulation.active`` answers no run), else to
  the up host with the fewest runs this process sent it and not seen ending, else it fails
  like an unanswered request (``SnakeLabUnavailable``). Runs submitted one after another
  without waiting (a confirmation's) so spread over the idle hosts and train side by side; a
  step that submits one run and waits for it uses one host at a time.
* ``simulation.status``, ``.pause``, ``.resume``, ``.cancel`` go to the host that ran the run:
  known from the submit, else found by asking each host (the others answer ``run_not_found``).
  When no host that answers knows the run and a host is down, the run may be that host's: the
  request fails as unanswered, and the caller waits as it does for one SnakeLab that is away.
  When every host answers ``run_not_found``, so does this client (the run's host restarted;
  its row in the shared database tells how it ended).
* ``health`` is answered by the first host that answers.

A host that does not answer is skipped and reported once (``on_change(endpoint, "down")``, a
WARNING event in the orchestrator), and used again, reported ``"up"``, when it answers.
``states`` (idle, running, down or unknown per endpoint) feeds the status API.

Exactly once still holds: a submit is sent to one host and never resent; a lost answer is
settled from the shared database (``ax3l.shared.submit_once``), whichever host created the run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import zmq.asyncio

from ax3l.shared.snakelab_client import SnakeLabClient, SnakeLabError, SnakeLabUnavailable
from ax3l.shared.wire import TERMINAL_STATES

logger = logging.getLogger(__name__)

HostChange = Callable[[str, str], Awaitable[None]]
RUN_METHODS = frozenset(
    {"simulation.status", "simulation.pause", "simulation.resume", "simulation.cancel"}
)


def parse_endpoints(text: str | None, single: str) -> list[str]:
    """The hosts of ``AX3L_SNAKELAB_ENDPOINTS`` (``single`` when unset), in order, each once;
    ``ValueError`` names an entry that is no ZeroMQ tcp endpoint."""
    if text is None or not text.strip():
        return [single]
    endpoints: list[str] = []
    for part in text.split(","):
        endpoint = part.strip()
        if not endpoint.startswith("tcp://") or ":" not in endpoint[len("tcp://") :]:
            raise ValueError(
                f"AX3L_SNAKELAB_ENDPOINTS: {endpoint!r} is not tcp://HOST:PORT"
                " (a comma-separated list of SnakeLab control endpoints)"
            )
        if endpoint not in endpoints:
            endpoints.append(endpoint)
    return endpoints


class SnakeLabHosts(SnakeLabClient):
    """One client for several SnakeLab hosts: submits to idle hosts, routes by run."""

    def __init__(
        self,
        endpoints: Sequence[str],
        timeout: float = 3.0,
        context: zmq.asyncio.Context | None = None,
        on_change: HostChange | None = None,
    ):
        if not endpoints:
            raise ValueError("SnakeLabHosts needs at least one endpoint")
        super().__init__(endpoints[0], timeout, context)
        self.hosts = [SnakeLabClient(e, timeout, context) for e in endpoints]
        self.states: dict[str, str] = {e: "unknown" for e in endpoints}
        self._on_change = on_change
        self._run_host: dict[str, SnakeLabClient] = {}
        self._in_flight: dict[str, set[str]] = {e: set() for e in endpoints}

    def host_of(self, run_id: str) -> str | None:
        """The endpoint that ran ``run_id``, when this process knows it."""
        host = self._run_host.get(run_id)
        return None if host is None else host.endpoint

    async def call(self, method: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        if method == "simulation.submit":
            return await self._submit(payload)
        if method in RUN_METHODS and payload and isinstance(payload.get("run_id"), str):
            return await self._for_run(method, payload)
        return await self._first_answer(method, payload)

    async def _submit(self, payload: dict[str, Any] | None) -> dict[str, Any]:
        host = await self._pick()
        reply = await self._ask(host, "simulation.submit", payload)
        run_id = reply.get("run_id")
        if isinstance(run_id, str):
            self._run_host[run_id] = host
            self._in_flight[host.endpoint].add(run_id)
        return reply

    async def _pick(self) -> SnakeLabClient:
        """An idle host, else the up host with the fewest runs in flight."""
        up: list[SnakeLabClient] = []
        for host in self.hosts:
            try:
                active = await self._ask(host, "simulation.active", None)
            except SnakeLabUnavailable:
                continue
            if active.get("run") is None:
                self.states[host.endpoint] = "idle"
                return host
            self.states[host.endpoint] = "running"
            up.append(host)
        if not up:
            raise SnakeLabUnavailable(
                f"no SnakeLab host answered ({', '.join(h.endpoint for h in self.hosts)})"
            )
        return min(up, key=lambda host: len(self._in_flight[host.endpoint]))

    async def _for_run(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        run_id = payload["run_id"]
        known = self._run_host.get(run_id)
        if known is not None:
            reply = await self._ask(known, method, payload)
            self._note_state(known, reply)
            return reply
        missing: SnakeLabError | None = None
        away: SnakeLabUnavailable | None = None
        for host in self.hosts:
            try:
                reply = await self._ask(host, method, payload)
            except SnakeLabError as exc:
                if exc.code != "run_not_found":
                    raise
                missing = exc
                continue
            except SnakeLabUnavailable as exc:
                away = exc
                continue
            self._run_host[run_id] = host
            self._note_state(host, reply)
            return reply
        if away is not None:
            raise away  # the run may be the silent host's
        assert missing is not None
        raise missing

    def _note_state(self, host: SnakeLabClient, reply: dict[str, Any]) -> None:
        run_id, state = reply.get("run_id"), reply.get("state")
        if isinstance(run_id, str) and state in TERMINAL_STATES:
            self._in_flight[host.endpoint].discard(run_id)

    async def _first_answer(self, method: str, payload: dict[str, Any] | None) -> dict[str, Any]:
        away: SnakeLabUnavailable | None = None
        for host in self.hosts:
            try:
                return await self._ask(host, method, payload)
            except SnakeLabUnavailable as exc:
                away = exc
        assert away is not None
        raise away

    async def _ask(
        self, host: SnakeLabClient, method: str, payload: dict[str, Any] | None
    ) -> dict[str, Any]:
        """One request to one host, noting whether it answered."""
        try:
            reply = await host.call(method, payload)
        except SnakeLabUnavailable:
            await self._set_down(host, True)
            raise
        except SnakeLabError:
            await self._set_down(host, False)  # an error reply is an answer
            raise
        await self._set_down(host, False)
        return reply

    async def _set_down(self, host: SnakeLabClient, down: bool) -> None:
        was_down = self.states[host.endpoint] == "down"
        if down == was_down:
            return
        self.states[host.endpoint] = "down" if down else "unknown"
        if down:
            logger.warning("SnakeLab host %s does not answer: skipped", host.endpoint)
        else:
            logger.info("SnakeLab host %s answers again", host.endpoint)
        if self._on_change is not None:
            await self._on_change(host.endpoint, "down" if down else "up")


def snakelab_client(
    endpoints: Sequence[str],
    timeout: float,
    context: zmq.asyncio.Context | None = None,
    on_change: HostChange | None = None,
) -> SnakeLabClient:
    """A plain client for one host (today's behaviour, byte for byte), ``SnakeLabHosts`` for
    several."""
    if len(endpoints) == 1:
        return SnakeLabClient(endpoints[0], timeout, context)
    return SnakeLabHosts(endpoints, timeout, context, on_change)


def several_hosts_host(client: SnakeLabClient, run_id: str) -> str | None:
    """The endpoint to record for ``run_id`` in its ``simulation_submitted``: only with several
    hosts (one host's events store exactly what they stored before)."""
    return client.host_of(run_id) if isinstance(client, SnakeLabHosts) else None
