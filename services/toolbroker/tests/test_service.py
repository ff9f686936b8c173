"""The ``ax3l-toolbroker`` process: REST, shutdown, and exactly-once across a SIGKILL."""

import contextlib
import os
import signal
import sys

import httpx
import zmq
from broker_harness import SCHEMA, envelope, events, open_turn, running_broker, send_raw

import ax3l.shared.db.intents as intents
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.processes import ManagedProcess
from ax3l.shared.settings import Settings
from ax3l.shared.tool_channel import settle_does_not_fit
from ax3l.testing.databases import run_module
from ax3l.testing.plugin import free_port


class BrokerProcess(ManagedProcess):
    """``python -m ax3l.toolbroker`` on free ports, its output in a file."""

    def __init__(self, env, tmp_path, **extra_env):
        self.zmq_endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        options = ["--zmq-endpoint", self.zmq_endpoint, "--port", str(self.port)]
        super().__init__(
            "toolbroker",
            [sys.executable, "-m", "ax3l.toolbroker", *options],
            {**os.environ, **env, **extra_env},
            tmp_path / f"broker-{self.port}.log",
        )

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.kill()

    async def wait_healthy(self, within=30.0):
        async with httpx.AsyncClient() as client:

            async def healthy():
                with contextlib.suppress(httpx.TransportError):
                    return (await client.get(f"{self.url}/health")).status_code == 200
                return False

            await self.wait_ready_async(healthy, within)


async def test_sigkill_after_snakelab_accepted_is_adopted_exactly_once(
    databases, lab, golden, tmp_path
):
    """A broker killed between SnakeLab's reply and the events has the run adopted once, as
    the turn's proposal: the lost reply's resubmission is refused, not a second run."""
    checkpoint = await open_turn(databases, "gamma")
    with BrokerProcess(lab.env(), tmp_path, AX3L_TEST_CRASH_AT="broker_after_submit") as crashing:
        await crashing.wait_healthy()
        sock = zmq.Context.instance().socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        try:
            sock.connect(crashing.zmq_endpoint)
            sock.send(envelope("submit_single_value", {"parameter": "gamma", "value": 0.965}))
            assert await crashing.wait_exit_async() == -signal.SIGKILL
        finally:
            sock.close(linger=0)
    candidate = SCHEMA.with_values(golden["config"], {"training.gamma": 0.965})
    (run_id,) = [r for r in lab.runs_with_seed(candidate["seed"]) if r != golden["run_id"]]
    assert lab.stored_config(run_id) == candidate
    assert events(databases, "proposal_accepted") == []

    with BrokerProcess(lab.env(), tmp_path) as restarted:
        settings = databases.settings(AX3L_SNAKELAB_DB_NAME=lab.db_name)
        async with Database(settings) as db:
            orchestrator_adopted = await intents.reconcile(db, SCHEMA, EventLog(db))
        await restarted.wait_healthy()
        accepted = events(databases, "proposal_accepted", "simulation_submitted")
        assert [(e["name"], e["process_id"]) for e in accepted] == [
            ("proposal_accepted", run_id),
            ("simulation_submitted", run_id),
        ]
        assert accepted[0]["content"]["adopted"] is True
        assert accepted[0]["content"]["values"] == {"value": 0.965}
        assert accepted[0]["content"]["checkpoint_event_id"] == checkpoint
        assert orchestrator_adopted in ([], [run_id])
        reply = await send_raw(
            restarted.zmq_endpoint,
            envelope("submit_single_value", {"parameter": "gamma", "value": 0.965}),
        )
        error = reply["payload"]["error"]
        assert error["code"] == "handler_error" and run_id in error["message"]
        restarted.popen.send_signal(signal.SIGTERM)
        assert await restarted.wait_exit_async() == 0
    assert len(events(databases, "proposal_accepted")) == 1


async def test_rest_reports_health_readiness_and_request_counts(databases, lab, golden, tmp_path):
    """/health, /ready and /api/status answer; SIGTERM stops the process cleanly."""
    await open_turn(databases, "gamma")
    with BrokerProcess(lab.env(), tmp_path) as process:
        await process.wait_healthy()
        await send_raw(process.zmq_endpoint, b"garbage")
        await send_raw(
            process.zmq_endpoint,
            envelope("submit_single_value", {"parameter": "gamma", "value": 0.921}),
        )
        async with httpx.AsyncClient(base_url=process.url) as client:
            ready = await client.get("/ready")
            status = (await client.get("/api/status")).json()
        assert ready.status_code == 200
        assert ready.json() == {
            "status": "ready",
            "checks": {"database": True, "snakelab": True},
            "problems": [],
        }
        assert status["requests_handled"] == 2 and status["endpoint"] == process.zmq_endpoint
        assert status["outcomes"]["invalid_request"] == 1 and status["outcomes"]["accepted"] == 1
        assert status["last_request_at"] is not None
        process.popen.send_signal(signal.SIGTERM)
        assert await process.wait_exit_async() == 0


async def test_ready_is_503_when_snakelab_does_not_answer(databases, lab):
    """A dead SnakeLab endpoint makes /ready fail with the reason, while /health stays up."""
    dead = f"tcp://127.0.0.1:{free_port()}"
    async with running_broker(databases, dead, lab.db_name, AX3L_SNAKELAB_TIMEOUT="0.2") as broker:
        transport = httpx.ASGITransport(app=broker.broker.app())
        async with httpx.AsyncClient(transport=transport, base_url="http://toolbroker") as client:
            ready = await client.get("/ready")
            health = await client.get("/health")
    assert ready.status_code == 503 and health.status_code == 200
    body = ready.json()
    assert body["status"] == "not ready"
    assert body["checks"] == {"database": True, "snakelab": False}
    [problem] = body["problems"]
    assert problem.startswith("snakelab: ") and "did not answer" in problem


def test_an_unknown_crash_point_stops_the_broker_at_start():
    """A misspelt AX3L_TEST_CRASH_AT cannot hide a test gap: the broker exits 2 and says so."""
    env = dict(os.environ, AX3L_TEST_CRASH_AT="broker_after_sumbit")
    result = run_module("ax3l.toolbroker", env=env, timeout=60)
    assert result.returncode == 2
    assert "unknown crash point 'broker_after_sumbit'" in result.stderr


def test_a_settle_wait_that_does_not_fit_the_tool_channel_stops_the_broker_at_start():
    """The documented limit, checked: AX3L_SNAKELAB_TIMEOUT plus AX3L_SUBMIT_SETTLE_WAIT over
    AX3L_ZMQ_TIMEOUT (a proposal accepted after a late answer would reach its client as a
    timeout) ends the broker at once with exit 2, naming all three; at the limit it is fine."""
    env = dict(
        os.environ,
        AX3L_SNAKELAB_TIMEOUT="3",
        AX3L_SUBMIT_SETTLE_WAIT="8",
        AX3L_ZMQ_TIMEOUT="10.5",
    )
    result = run_module("ax3l.toolbroker", env=env, timeout=60)
    assert result.returncode == 2
    assert "AX3L_SNAKELAB_TIMEOUT (3 s) plus AX3L_SUBMIT_SETTLE_WAIT (8 s) is 11 s" in result.stderr
    assert "more than AX3L_ZMQ_TIMEOUT (10.5 s)" in result.stderr
    fits = Settings(AX3L_SNAKELAB_TIMEOUT=3, AX3L_SUBMIT_SETTLE_WAIT=8, AX3L_ZMQ_TIMEOUT=11)
    assert settle_does_not_fit(fits) is None
