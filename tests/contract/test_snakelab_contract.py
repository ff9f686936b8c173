"""SnakeLab's control contract, through Ax3l's own client, against a real SnakeLab process.

This is the suite Ax3l's ``SnakeLabClient`` is tested with: every method and every error code
of ``docs/snakelab-contract.md`` that a client can reach, over a real ZeroMQ socket, against the
reference SnakeLab with each trainer (a 0-second surrogate that finishes runs at once, a slow
surrogate and ``drqn`` whose runs stay in progress), each on its own scratch database, and
against the test support's scripted SnakeLab for the methods it claims. Only
behaviour the contract states is asserted here; the reference's own choices are pinned in
``services/snakelab/tests``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import zmq
import zmq.asyncio

from ax3l.shared.config_schema import load_schema
from ax3l.shared.snakelab_client import SnakeLabClient, SnakeLabError
from ax3l.shared.waiting import WaitTimeout, wait_until_async
from ax3l.shared.wire import RunStatus
from ax3l.testing.snakelab_process import (
    ScratchDatabase,
    SnakeLabProcess,
    scratch_snakelab_database,
)
from ax3l.testing.zmq_peer import ScriptedPeer, ok, refused, scripted_snakelab

SCHEMA = load_schema()
STATUS_KEYS = {
    "run_id",
    "state",
    "epochs",
    "completed_epochs",
    "total_steps",
    "high_score",
    "total_reward",
    "epsilon_injections",
    "last_loss",
    "move_delay_ms",
    "last_episode",
}
LAST_EPISODE_KEYS = {
    "episode",
    "seed",
    "score",
    "reward",
    "steps",
    "outcome",
    "epsilon",
    "epsilon_injections",
    "loss",
}
# name -> (trainer, surrogate seconds): "surrogate" finishes a run in milliseconds; the others
# keep a run in progress long enough to pause, resume and cancel it.
LABS = {
    "surrogate": ("surrogate", 0.0),
    "surrogate-slow": ("surrogate", 120.0),
    "drqn": ("drqn", 0.0),
}
ALL = list(LABS)
FINISHING = ["surrogate"]
BUSY = ["surrogate-slow", "drqn"]
# The scripted SnakeLab of the test support (ax3l.testing.zmq_peer), held to the contract for
# what it claims: health, the reply envelope, unknown methods and unknown runs.
SCRIPTED = "scripted"


def scripted_lab() -> ScriptedPeer:
    """The scripted SnakeLab: idle (``active`` is null), and no run is ever found."""

    def unknown_run(payload: Any) -> dict[str, Any]:
        return refused("run_not_found", f"no run {payload.get('run_id')!r}")

    runs = ("simulation.status", "simulation.pause", "simulation.resume", "simulation.cancel")
    methods = {method: unknown_run for method in runs}
    return scripted_snakelab(
        {
            "health": lambda _: ok({"service": "snake-lab", "project_version": "2.1.0"}),
            "simulation.active": lambda _: ok({"run": None}),
            **methods,
        }
    )


@dataclass
class Lab:
    """One SnakeLab process on its own database, and the runs the current test submitted."""

    kind: str
    server: SnakeLabProcess | None  # None: the scripted SnakeLab (no process, no database)
    database: ScratchDatabase | None
    client: SnakeLabClient
    created: list[str] = field(default_factory=list)

    async def submit(self, config: dict[str, Any] | None = None) -> str:
        reply = await self.client.submit(config or {})
        self.created.append(reply.run_id)
        return reply.run_id

    async def raw(self, message: Any) -> dict[str, Any]:
        """Send ``message`` (bytes as they are, anything else as JSON); the parsed reply."""
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        reply = json.loads(await self.client.exchange(data))
        assert isinstance(reply, dict)
        return reply

    async def wait_status(self, run_id: str, predicate: Any, within: float = 30.0) -> RunStatus:
        seen: list[RunStatus] = []

        async def reached() -> RunStatus | None:
            seen[:] = [await self.client.status(run_id)]
            return seen[0] if predicate(seen[0]) else None

        try:
            found: RunStatus = await wait_until_async(reached, within, interval=0.01)
        except WaitTimeout:
            pytest.fail(f"run {run_id} never reached the condition; last status {seen[0]}")
        return found

    def rows(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """The rows of ``sql`` in this SnakeLab's database, each by column name."""
        assert self.database is not None, "the scripted SnakeLab has no database"
        conn = self.database.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                names = [d[0] for d in cur.description]
                return [dict(zip(names, values, strict=True)) for values in cur.fetchall()]
        finally:
            conn.close()

    def row(self, run_id: str) -> dict[str, Any] | None:
        found = self.rows(
            "SELECT r.*, c.* FROM simulation_runs r"
            " JOIN configurations c ON c.run_id = r.run_id WHERE r.run_id = %s",
            run_id,
        )
        return found[0] if found else None

    def scalar(self, sql: str, *args: Any) -> Any:
        return next(iter(self.rows(sql, *args)[0].values()))


@pytest.fixture(scope="module")
def lab_process(request: pytest.FixtureRequest, db_env: dict[str, str]) -> Iterator[Lab]:
    kind = request.param
    if kind == SCRIPTED:
        peer = scripted_lab()
        try:
            yield Lab(kind, None, None, SnakeLabClient(peer.endpoint))
        finally:
            peer.close()
        return
    trainer, seconds = LABS[kind]
    with (
        scratch_snakelab_database(db_env) as database,
        SnakeLabProcess(database.env(), trainer=trainer, seconds=seconds) as server,
    ):
        yield Lab(kind, server, database, SnakeLabClient(server.endpoint))


@pytest.fixture
async def lab(lab_process: Lab) -> AsyncIterator[Lab]:
    """The module's SnakeLab, left idle again after the test (its runs cancelled)."""
    lab_process.created = []
    yield lab_process
    for run_id in lab_process.created:
        try:
            await lab_process.client.cancel(run_id)
        except SnakeLabError as exc:
            # Teardown, not the test's assertion: only an already terminal run may refuse.
            assert exc.code == "invalid_run_state"  # noqa: PT017

    async def idle() -> bool:
        return await lab_process.client.active() is None

    await wait_until_async(idle, 30, "SnakeLab to become idle after the test", interval=0.01)


def envelope(request_id: Any, **fields: Any) -> dict[str, Any]:
    """A health request with ``request_id``, ``fields`` replacing or adding envelope keys."""
    request = {"protocol_version": 1, "request_id": request_id, "method": "health", "payload": {}}
    return {**request, **fields}


def labs(*kinds: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("lab_process", kinds, indirect=True)


def is_terminal(status: RunStatus) -> bool:
    return status.terminal


def has_episodes(status: RunStatus) -> bool:
    return status.state == "running" and status.completed_epochs > 0


# -- envelope ------------------------------------------------------------------------------


@labs(*ALL, SCRIPTED)
async def test_health_names_the_service(lab: Lab) -> None:
    """health answers service "snake-lab" and a project version."""
    reply = await lab.client.health()
    assert reply.service == "snake-lab"
    assert reply.project_version


@labs(*ALL, SCRIPTED)
async def test_replies_have_the_exact_envelope(lab: Lab) -> None:
    """Success and error replies carry exactly their four keys and echo the request id."""
    ok = await lab.raw(envelope("r-ok"))
    assert set(ok) == {"protocol_version", "request_id", "status", "payload"}
    assert (ok["protocol_version"], ok["request_id"], ok["status"]) == (1, "r-ok", "ok")
    error = await lab.raw(envelope("r-err", method="nope"))
    assert set(error) == {"protocol_version", "request_id", "status", "error"}
    assert (error["request_id"], error["status"]) == ("r-err", "error")
    assert set(error["error"]) == {"code", "message"}


@labs(*ALL)
async def test_an_extra_envelope_key_is_an_invalid_request(lab: Lab) -> None:
    """A fifth key such as "sender" is refused with invalid_request."""
    reply = await lab.raw(envelope("r1", sender="ax3l"))
    assert reply["error"]["code"] == "invalid_request"
    assert reply["request_id"] == "r1"
    assert "sender" in reply["error"]["message"]


@labs(*ALL)
@pytest.mark.parametrize("version", [True, "1", 1.0, None])
async def test_a_protocol_version_that_is_not_the_integer_1_is_refused(
    lab: Lab, version: Any
) -> None:
    """protocol_version true, "1", 1.0 or null is not the integer 1: invalid_request."""
    reply = await lab.raw(envelope("r2", protocol_version=version))
    assert reply["status"] == "error"
    assert reply["error"]["code"] == "invalid_request"
    assert reply["request_id"] == "r2"


@labs(*ALL)
async def test_another_protocol_version_is_unsupported(lab: Lab) -> None:
    """protocol_version 2 is a well-formed request of a protocol this server does not speak."""
    reply = await lab.raw(envelope("r3", protocol_version=2))
    assert reply["error"]["code"] == "unsupported_protocol"
    assert reply["request_id"] == "r3"


@labs(*ALL)
@pytest.mark.parametrize("payload", [[], "config", None, 5])
async def test_a_payload_that_is_not_an_object_is_refused(lab: Lab, payload: Any) -> None:
    """A payload that is a list, string, null or number is an invalid_request."""
    reply = await lab.raw(envelope("r4", payload=payload))
    assert reply["error"]["code"] == "invalid_request"
    assert reply["request_id"] == "r4"


@labs(*ALL)
@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe\x00garbage",
        b"{not json",
        b"",
        b"[1, 2, 3]",
        b'"just a string"',
        b'{"protocol_version": 1, "request_id": "a", "request_id": "b",'
        b' "method": "health", "payload": {}}',
    ],
    ids=["garbage", "not-json", "empty", "array", "string", "duplicate-key"],
)
async def test_unreadable_messages_get_invalid_request_with_a_null_id(lab: Lab, raw: bytes) -> None:
    """Garbage bytes, non-JSON and non-objects still get one JSON error reply (request_id null)."""
    reply = await lab.raw(raw)
    assert reply["status"] == "error"
    assert reply["error"]["code"] == "invalid_request"
    assert reply["request_id"] is None


@labs(*ALL)
async def test_a_huge_message_is_refused_and_the_server_keeps_serving(lab: Lab) -> None:
    """A 1 MiB request gets invalid_request, and the next request is served normally."""
    padding = "x" * (1024 * 1024)
    payload = {"config": {"padding": padding}}
    reply = await lab.raw(envelope("big", method="simulation.submit", payload=payload))
    assert reply["error"]["code"] == "invalid_request"
    assert (await lab.client.health()).service == "snake-lab"


@labs(*ALL)
@pytest.mark.parametrize("request_id", ["", 7, None])
async def test_a_request_id_must_be_a_non_empty_string(lab: Lab, request_id: Any) -> None:
    """An empty, numeric or null request_id is an invalid_request (and is not echoed)."""
    reply = await lab.raw(envelope(request_id))
    assert reply["error"]["code"] == "invalid_request"
    assert reply["request_id"] is None


@labs(*ALL)
async def test_a_missing_envelope_key_is_an_invalid_request(lab: Lab) -> None:
    """A request without payload is refused with invalid_request."""
    reply = await lab.raw({"protocol_version": 1, "request_id": "r5", "method": "health"})
    assert reply["error"]["code"] == "invalid_request"
    assert reply["request_id"] == "r5"


@labs(*ALL, SCRIPTED)
async def test_an_unknown_method_is_named(lab: Lab) -> None:
    """A method the server does not have answers unknown_method."""
    with pytest.raises(SnakeLabError) as caught:
        await lab.client.call("simulation.teleport", {})
    assert caught.value.code == "unknown_method"


# -- submit and config validation -------------------------------------------------------------


@labs(*ALL)
async def test_a_partial_config_is_filled_with_defaults_and_queued(lab: Lab) -> None:
    """A partial submit creates a queued uuid4 run whose stored config is the schema defaults."""
    reply = await lab.client.submit({"seed": 4242})
    lab.created.append(reply.run_id)
    assert reply.state == "queued"
    assert reply.queue_position >= 1
    assert uuid.UUID(reply.run_id).version == 4
    row = lab.row(reply.run_id)
    assert row is not None
    expected = SCHEMA.flatten(SCHEMA.fill_defaults({"seed": 4242}))
    assert {column: row[column] for column in SCHEMA.columns} == expected
    status = await lab.client.status(reply.run_id)
    assert status.epochs == 1500


@labs(*ALL)
async def test_every_valid_submit_creates_a_new_run(lab: Lab) -> None:
    """The same config submitted twice gives two runs with the same config_hash."""
    first = await lab.submit({"seed": 77})
    second = await lab.submit({"seed": 77})
    assert first != second
    rows = [lab.row(first), lab.row(second)]
    assert all(rows)
    assert rows[0]["config_hash"] == rows[1]["config_hash"]  # type: ignore[index]


@labs(*ALL)
async def test_config_hash_is_sha256_of_the_canonical_full_config(lab: Lab) -> None:
    """config_hash is SHA-256 of the defaults-filled config as sorted, compact JSON."""
    run_id = await lab.submit({"training": {"gamma": 0.97}, "seed": 1970.0})
    config = SCHEMA.validate(SCHEMA.fill_defaults({"training": {"gamma": 0.97}, "seed": 1970}))
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    row = lab.row(run_id)
    assert row is not None
    assert row["config_hash"] == hashlib.sha256(canonical.encode()).hexdigest()


@labs(*ALL)
@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"epochs": 10}, "$.epochs"),
        ({"seed": True}, "$.seed"),
        ({"seed": 0}, "$.seed"),
        ({"training": {"gamma": False}}, "$.training.gamma"),
        ({"training": {"learning_rate": "0.003"}}, "$.training.learning_rate"),
        ({"model": {"hidden_size": 100}}, "$.model.hidden_size"),
        ({"model": {"layers": 3}}, "$.model.layers"),
        ({"epsilon": {"decay": 1.5}}, "$.epsilon.decay"),
        ({"sender": "ax3l"}, "sender"),
        ({"game": {"rewards": {"bonus": 1}}}, "bonus"),
        ({"training": 5}, "$.training"),
    ],
)
async def test_a_bad_config_is_invalid_config_naming_the_field(
    lab: Lab, config: dict[str, Any], path: str
) -> None:
    """Out-of-range, boolean, string, unknown-key and mistyped configs are refused by path."""
    before = lab.scalar("SELECT COUNT(*) FROM simulation_runs")
    with pytest.raises(SnakeLabError) as caught:
        await lab.client.submit(config)
    assert caught.value.code == "invalid_config"
    assert path in caught.value.message
    assert lab.scalar("SELECT COUNT(*) FROM simulation_runs") == before


@labs(*ALL)
async def test_a_config_error_reads_like_the_contract(lab: Lab) -> None:
    """The message of an out-of-range value is `$.epochs: 10 is less than the minimum of N`."""
    with pytest.raises(SnakeLabError) as caught:
        await lab.client.submit({"epochs": 10})
    minimum = SCHEMA.by_path["epochs"].minimum
    assert caught.value.message == f"$.epochs: 10 is less than the minimum of {minimum}"


@labs(*ALL)
@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
async def test_a_nan_literal_in_a_config_is_refused(lab: Lab, token: str) -> None:
    """A NaN or Infinity token (not JSON, but sent by sloppy encoders) never becomes a run."""
    raw = (
        '{"protocol_version": 1, "request_id": "nan", "method": "simulation.submit",'
        f' "payload": {{"config": {{"training": {{"gamma": {token}}}}}}}}}'
    ).encode()
    before = lab.scalar("SELECT COUNT(*) FROM simulation_runs")
    reply = await lab.raw(raw)
    assert reply["status"] == "error"
    assert reply["error"]["code"] in ("invalid_config", "invalid_request")
    assert lab.scalar("SELECT COUNT(*) FROM simulation_runs") == before


@labs(*ALL)
@pytest.mark.parametrize(
    "payload",
    [{}, {"config": {}, "priority": 1}, {"config": [1]}],
    ids=["no-config", "extra", "list"],
)
async def test_a_submit_payload_must_hold_one_config_object(
    lab: Lab, payload: dict[str, Any]
) -> None:
    """A submit without a config, with an extra key, or with a non-object config is refused."""
    with pytest.raises(SnakeLabError) as caught:
        await lab.client.call("simulation.submit", payload)
    assert caught.value.code in ("invalid_request", "invalid_config")


# -- status, active ---------------------------------------------------------------------------


@labs(*ALL)
async def test_the_status_object_has_exactly_the_contract_keys(lab: Lab) -> None:
    """status answers the contract's eleven keys (error only when there is one)."""
    run_id = await lab.submit({"seed": 5})
    payload = await lab.client.call("simulation.status", {"run_id": run_id})
    assert set(payload) - {"error"} == STATUS_KEYS
    status = RunStatus.model_validate(payload)
    assert status.run_id == run_id
    assert status.epochs == 1500
    if payload["last_episode"] is not None:
        assert set(payload["last_episode"]) == LAST_EPISODE_KEYS


@labs(*ALL, SCRIPTED)
@pytest.mark.parametrize(
    "method",
    ["simulation.status", "simulation.pause", "simulation.resume", "simulation.cancel"],
)
async def test_an_unknown_run_is_run_not_found(lab: Lab, method: str) -> None:
    """status, pause, resume and cancel of a run this server never had answer run_not_found."""
    with pytest.raises(SnakeLabError) as caught:
        await lab.client.call(method, {"run_id": str(uuid.uuid4())})
    assert caught.value.code == "run_not_found"


@labs(*ALL)
async def test_a_run_id_must_be_a_string(lab: Lab) -> None:
    """status with a numeric run_id is an invalid_request, not a lookup."""
    with pytest.raises(SnakeLabError) as caught:
        await lab.client.call("simulation.status", {"run_id": 12})
    assert caught.value.code == "invalid_request"


@labs(*FINISHING)
async def test_active_is_null_when_idle(lab: Lab) -> None:
    """active answers {"run": null} when nothing is queued or running."""
    run_id = await lab.submit()
    await lab.wait_status(run_id, is_terminal)
    assert await lab.client.active() is None


@labs(*BUSY)
async def test_active_is_the_running_run_then_the_first_queued(lab: Lab) -> None:
    """active is the run on the worker while one runs, else the first queued run."""
    first = await lab.submit({"seed": 1})
    second = await lab.submit({"seed": 2})
    await lab.wait_status(first, has_episodes)
    active = await lab.client.active()
    assert active is not None and active.run_id == first and active.state == "running"
    assert (await lab.client.status(second)).state == "queued"
    await lab.client.cancel(first)
    await lab.wait_status(second, lambda s: s.state == "running")
    active = await lab.client.active()
    assert active is not None and active.run_id == second


# -- a finished run ----------------------------------------------------------------------------


@labs(*FINISHING)
async def test_a_completed_run_is_reported_and_stored(lab: Lab) -> None:
    """A completed run's status matches its row: episodes, high score, snapshot, times."""
    run_id = await lab.submit({"seed": 1971, "epochs": 500})
    status = await lab.wait_status(run_id, is_terminal)
    assert status.state == "completed"
    assert status.completed_epochs == status.epochs == 500
    assert status.last_episode is not None and status.last_episode.episode == 500
    row = lab.row(run_id)
    assert row is not None
    assert row["status"] == "completed"
    assert row["episode_count"] == 500
    assert row["high_score"] == status.high_score
    assert row["created_at"] <= row["started_at"] <= row["completed_at"]
    assert row["error_message"] is None
    episodes = lab.scalar("SELECT COUNT(*) FROM simulation_episodes WHERE run_id = %s", run_id)
    best = lab.scalar("SELECT MAX(score) FROM simulation_episodes WHERE run_id = %s", run_id)
    assert (episodes, best) == (500, status.high_score)
    snapshot = json.loads(row["high_score_snapshot"])
    assert snapshot["version"] == 1
    assert 1 <= snapshot["episode"] <= 500
    board = snapshot["board"]
    assert board["grid_size"] == [20, 20]
    assert board["score"] == status.high_score
    assert {"snake_head", "snake_body", "food", "direction"} <= set(board)


@labs(*FINISHING)
async def test_pause_resume_and_cancel_of_a_completed_run_are_invalid_run_state(
    lab: Lab,
) -> None:
    """A terminal run cannot be paused, resumed or cancelled."""
    run_id = await lab.submit()
    await lab.wait_status(run_id, is_terminal)
    for call in (lab.client.pause, lab.client.resume, lab.client.cancel):
        with pytest.raises(SnakeLabError) as caught:
            await call(run_id)
        assert caught.value.code == "invalid_run_state"


@labs(*FINISHING)
async def test_runs_start_in_submission_order_one_at_a_time(lab: Lab) -> None:
    """Runs run FIFO: each starts after the previous one completed, in submission order."""
    run_ids = [await lab.submit({"seed": 500 + i, "epochs": 500}) for i in range(5)]
    await lab.wait_status(run_ids[-1], is_terminal)
    rows = [lab.row(run_id) for run_id in run_ids]
    assert all(row is not None and row["status"] == "completed" for row in rows)
    for earlier, later in itertools.pairwise(rows):
        assert earlier["id"] < later["id"]  # type: ignore[index]
        assert earlier["completed_at"] <= later["started_at"]  # type: ignore[index]


@labs(*FINISHING)
async def test_the_ended_event_follows_the_stored_terminal_state(lab: Lab) -> None:
    """snake_lab.simulation.ended is published, and by then the row is terminal."""
    context = zmq.asyncio.Context.instance()
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    monitor = sub.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    try:
        sub.setsockopt(zmq.SUBSCRIBE, b"snake_lab.simulation.ended")
        assert lab.server is not None
        sub.connect(lab.server.events_endpoint)
        await asyncio.wait_for(monitor.recv_multipart(), 5)
        run_id = await lab.submit()
        while True:
            topic, body = await asyncio.wait_for(sub.recv_multipart(), 10)
            event = json.loads(body)
            if event["run_id"] == run_id:
                break
        assert topic == b"snake_lab.simulation.ended"
        row = lab.row(run_id)
        assert row is not None
        assert (event["state"], row["status"]) == ("completed", "completed")
        assert event["high_score"] == row["high_score"]
    finally:
        sub.disable_monitor()
        monitor.close(linger=0)
        sub.close(linger=0)


# -- pause, resume, cancel of runs in progress ---------------------------------------------------


@labs(*BUSY)
async def test_pause_holds_a_run_and_resume_continues_it(lab: Lab) -> None:
    """A paused run makes no progress; resumed, it runs on."""
    run_id = await lab.submit()
    await lab.wait_status(run_id, has_episodes)
    paused = await lab.client.pause(run_id)
    assert paused.state == "paused"
    # The trainer stops at its next episode boundary (at most one more episode), then holds:
    # watched for a while, at most one episode is ever added.
    seen = set()
    deadline = time.monotonic() + 0.4
    while time.monotonic() < deadline:
        status = await lab.client.status(run_id)
        assert status.state == "paused"
        seen.add(status.completed_epochs)
        await asyncio.sleep(0.02)
    assert seen <= {paused.completed_epochs, paused.completed_epochs + 1}
    later = await lab.client.status(run_id)
    resumed = await lab.client.resume(run_id)
    assert resumed.state == "running"
    await lab.wait_status(run_id, lambda s: s.completed_epochs > later.completed_epochs)


@labs(*BUSY)
async def test_cancel_stops_a_running_run(lab: Lab) -> None:
    """Cancelling a running run ends it cancelled, with fewer episodes than epochs, stored."""
    run_id = await lab.submit()
    await lab.wait_status(run_id, has_episodes)
    status = await lab.client.cancel(run_id)
    assert status.state in ("cancelling", "cancelled")
    final = await lab.wait_status(run_id, is_terminal)
    assert final.state == "cancelled"
    assert final.completed_epochs < final.epochs
    row = lab.row(run_id)
    assert row is not None
    assert row["status"] == "cancelled"
    assert row["completed_at"] is not None
    assert row["episode_count"] == final.completed_epochs


@labs(*BUSY)
async def test_cancel_of_a_queued_run_is_immediate(lab: Lab) -> None:
    """A queued run cancelled before it starts is cancelled at once and never runs."""
    first = await lab.submit({"seed": 1})
    second = await lab.submit({"seed": 2})
    status = await lab.client.cancel(second)
    assert status.state == "cancelled"
    assert status.completed_epochs == 0
    row = lab.row(second)
    assert row is not None
    assert (row["status"], row["started_at"]) == ("cancelled", None)
    assert (await lab.client.status(first)).state in ("queued", "running")


@labs(*BUSY)
async def test_a_paused_run_can_be_cancelled(lab: Lab) -> None:
    """Cancel reaches a paused run: it ends cancelled."""
    run_id = await lab.submit()
    await lab.wait_status(run_id, has_episodes)
    await lab.client.pause(run_id)
    await lab.client.cancel(run_id)
    final = await lab.wait_status(run_id, is_terminal)
    assert final.state == "cancelled"


@labs(*BUSY)
async def test_a_running_run_reports_its_progress(lab: Lab) -> None:
    """While running, status shows the last episode and the database follows the episodes."""
    run_id = await lab.submit()
    status = await lab.wait_status(run_id, lambda s: s.completed_epochs >= 2)
    assert status.last_episode is not None
    assert status.last_episode.episode == status.completed_epochs
    assert status.high_score is not None and status.high_score >= status.last_episode.score
    assert status.total_steps >= status.last_episode.steps

    def stored() -> int:
        return int(
            lab.scalar("SELECT episode_count FROM simulation_runs WHERE run_id = %s", run_id)
        )

    await wait_until_async(
        lambda: stored() >= status.completed_epochs,
        5,
        "episode_count to catch up with the run",
        interval=0.01,
    )
    assert lab.row(run_id)["status"] == "running"  # type: ignore[index]
