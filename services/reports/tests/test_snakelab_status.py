"""SnakeLab's state on the status bar, from its control socket, polled in the background."""

from __future__ import annotations

import asyncio

from reports_testing import running_status

from ax3l.reports.snakelab_status import SnakeLabMonitor, poll_snakelab
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.testing.plugin import free_port


async def test_idle_running_and_unavailable(fake_snakelab):
    """No active run is Idle, an active run is Running Simulation, silence is Unavailable."""
    client = SnakeLabClient(fake_snakelab.endpoint, timeout=1.0)
    idle = await poll_snakelab(client)
    assert (idle.state, idle.label) == ("idle", "SnakeLab Idle")
    fake_snakelab.active = running_status("run-1")
    running = await poll_snakelab(client)
    assert (running.state, running.label) == ("running", "Running Simulation")
    assert running.run is not None and running.run.completed_epochs == 700
    silent = await poll_snakelab(SnakeLabClient(f"tcp://127.0.0.1:{free_port()}", timeout=0.2))
    assert (silent.state, silent.label) == ("unavailable", "Service Unavailable")


async def test_malformed_reply_is_unavailable_not_a_crash(fake_snakelab):
    """A reply that breaks the contract shows SnakeLab as unavailable with a reason."""
    fake_snakelab.active = {"run_id": "x"}  # a status object missing most fields
    status = await poll_snakelab(SnakeLabClient(fake_snakelab.endpoint, timeout=1.0))
    assert status.state == "unavailable" and "contract" in (status.detail or "")


async def test_bad_endpoint_is_unavailable_not_a_crash():
    """An endpoint string ZeroMQ cannot use is reported, not raised."""
    status = await poll_snakelab(SnakeLabClient("not-an-endpoint", timeout=0.2))
    assert status.state == "unavailable"


async def test_status_api_follows_snakelab(fake_snakelab, experiment, make_client):
    """/api/status reflects the latest poll: idle first, running once SnakeLab reports a run."""
    import asyncio

    async with make_client(experiment.dbs, AX3L_SNAKELAB_ENDPOINT=fake_snakelab.endpoint) as http:
        first = (await http.get("/api/status")).json()["snakelab"]
        assert first["state"] == "idle"
        fake_snakelab.active = running_status("run-9")
        for _ in range(100):
            snakelab = (await http.get("/api/status")).json()["snakelab"]
            if snakelab["state"] == "running":
                break
            await asyncio.sleep(0.05)
        assert snakelab["state"] == "running" and snakelab["run_id"] == "run-9"


async def test_monitor_stops_cleanly(fake_snakelab):
    """The monitor's task ends when stopped; its last answer stays readable."""
    monitor = SnakeLabMonitor(SnakeLabClient(fake_snakelab.endpoint, timeout=1.0), interval=0.05)
    monitor.start()
    status = await monitor.current(wait=2.0)
    await monitor.stop()
    assert status.state == "idle" and monitor.latest.state == "idle"


class SwallowingClient:
    """A client whose every answer races the cancellation and wins, as Python 3.11's wait_for
    lets it: cancelled just as the reply arrives, the call returns the reply instead."""

    def __init__(self) -> None:
        self.calls = 0

    async def active(self) -> None:
        self.calls += 1
        reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(reply.set_result, None)
        return await asyncio.wait_for(reply, 1)


async def test_monitor_stops_even_when_its_poll_swallows_the_cancellation():
    """stop() returns although every cancellation is swallowed (the loop's own flag ends it)."""
    client = SwallowingClient()
    monitor = SnakeLabMonitor(client, interval=0)  # type: ignore[arg-type]
    monitor.start()
    await monitor.current(wait=2.0)
    await asyncio.wait_for(monitor.stop(), 5)
    calls = client.calls
    await asyncio.sleep(0.05)
    assert calls > 0 and client.calls == calls  # nothing polls any more
