"""``send_once`` tells SnakeLab's three outcomes apart over a real ZeroMQ socket, and
``created_runs`` finds only the runs stored after the position noted before a send."""

import contextlib

from ax3l.shared.config_schema import load_schema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.shared.submit_once import Refused, Sent, Unknown, created_runs, send_once
from ax3l.testing.snakelab_rows import insert_runs
from ax3l.testing.zmq_peer import ScriptedPeer, ok, refused, snakelab_reply

SCHEMA = load_schema()
DEFAULT = SCHEMA.default_config()


@contextlib.asynccontextmanager
async def snakelab_answering(reply):
    """A SnakeLab socket answering every request with ``reply`` (None: never), and a client."""
    peer = ScriptedPeer(lambda request: None if reply is None else snakelab_reply(request, reply))
    try:
        yield peer, SnakeLabClient(peer.endpoint, timeout=0.3)
    finally:
        peer.close()


async def test_an_accepted_submit_is_sent_once():
    """SnakeLab's reply comes back as Sent, after exactly one simulation.submit."""
    reply = ok({"run_id": "run-1", "state": "queued", "queue_position": 2})
    async with snakelab_answering(reply) as (peer, client):
        outcome = await send_once(client, DEFAULT)
    assert isinstance(outcome, Sent)
    assert (outcome.reply.run_id, outcome.reply.queue_position) == ("run-1", 2)
    assert [r["method"] for r in peer.requests] == ["simulation.submit"]
    assert peer.requests[0]["payload"] == {"config": DEFAULT}


async def test_an_error_reply_is_a_refusal():
    """SnakeLab answering with an error means no run was created: Refused, with its code."""
    async with snakelab_answering(refused("invalid_config", "gamma too large")) as (peer, client):
        outcome = await send_once(client, DEFAULT)
    assert isinstance(outcome, Refused)
    assert (outcome.error.code, outcome.error.message) == ("invalid_config", "gamma too large")
    assert len(peer.requests) == 1


async def test_no_answer_and_a_malformed_answer_are_unknown_and_never_resent():
    """A timeout and a reply that is not SnakeLab's submit reply both leave the run unknown;
    neither is sent a second time."""
    async with snakelab_answering(None) as (peer, client):
        silent = await send_once(client, DEFAULT)
        silent_requests = len(peer.requests)
    async with snakelab_answering(ok({"run_id": 7, "state": "queued"})) as (peer, client):
        malformed = await send_once(client, DEFAULT)
        malformed_requests = len(peer.requests)
    assert isinstance(silent, Unknown) and silent.problem
    assert isinstance(malformed, Unknown)
    assert malformed.problem == "SnakeLab's reply to simulation.submit is malformed"
    assert silent_requests == malformed_requests == 1


async def test_created_runs_are_the_configurations_runs_after_the_position(snakelab_tables):
    """Only runs of the same configuration stored after the noted position count as created
    by the send; older runs of it and newer runs of other configurations do not."""
    dbs = snakelab_tables
    other = SCHEMA.with_values(DEFAULT, {"training.gamma": 0.9})
    (older,) = insert_runs(dbs, SCHEMA, DEFAULT, status="failed")
    async with Database(dbs.settings()) as db:
        index = ConfigIndex(db, SCHEMA)
        assert [run.run_id for run in await index.find_indexed(DEFAULT)] == [older]
        position = await index.position()
        assert await created_runs(index, DEFAULT, position) == []
        newer, _ = insert_runs(dbs, SCHEMA, DEFAULT, other)
        created = await created_runs(index, DEFAULT, position)
        everything = await created_runs(index, DEFAULT, 0)
    assert [run.run_id for run in created] == [newer]
    assert [run.run_id for run in everything] == [older, newer]
