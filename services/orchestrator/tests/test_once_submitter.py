"""The orchestrator's own runs are submitted exactly once: a run SnakeLab created but whose
answer was lost is taken, not submitted again; a stored usable run is reused; a refused
configuration stops the loop. Against a scripted SnakeLab socket and real SnakeLab tables."""

import contextlib

import pytest

from ax3l.orchestrator.status import LoopStatus
from ax3l.shared.config_schema import load_schema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.snakelab_client import SnakeLabClient
from ax3l.shared.submit_once import OnceSubmitter, SubmissionRefused
from ax3l.testing.snakelab_rows import insert_runs
from ax3l.testing.zmq_peer import ScriptedPeer, ok, refused, snakelab_reply

SCHEMA = load_schema()
BASELINE = SCHEMA.with_values(SCHEMA.default_config(), {"seed": 2024})
HEALTH = ok({"service": "snake-lab", "project_version": "2.1.0"})


@contextlib.asynccontextmanager
async def submitter(dbs, on_submit):
    """An OnceSubmitter whose SnakeLab answers health, and ``simulation.submit`` with
    ``on_submit(config)`` (None: no answer)."""

    def answer(request):
        if request["method"] == "health":
            return snakelab_reply(request, HEALTH)
        reply = on_submit(request["payload"]["config"])
        return None if reply is None else snakelab_reply(request, reply)

    peer = ScriptedPeer(answer)
    status = LoopStatus(process_id="test-loop", proposer="tpe")
    try:
        async with Database(dbs.settings()) as db:
            client = SnakeLabClient(peer.endpoint, timeout=0.3)
            index = ConfigIndex(db, SCHEMA)
            yield OnceSubmitter(db, client, index, 0.05, status), peer, status
    finally:
        peer.close()


def submits(peer):
    return [r for r in peer.requests if r["method"] == "simulation.submit"]


async def test_a_run_whose_answer_was_lost_is_taken_not_submitted_again(snakelab_tables):
    """SnakeLab stores the run and its answer never arrives: once SnakeLab answers health
    again, the stored run is the submission's, and simulation.submit went out once."""
    dbs = snakelab_tables
    created: list[str] = []

    def store_and_stay_silent(config):
        created.extend(insert_runs(dbs, SCHEMA, config, status="queued"))
        return None

    async with submitter(dbs, store_and_stay_silent) as (once, peer, status):
        run_id, submitted_now = await once.reuse_or_submit(BASELINE, "seed 2024 baseline", "x")
    assert (run_id, submitted_now) == (created[0], True)
    assert len(submits(peer)) == 1
    assert status.last_error and status.last_error.startswith("seed 2024 baseline: ")


async def test_a_stored_usable_run_is_reused_without_a_submit(snakelab_tables):
    """A queued run of the configuration (a crash right after an earlier submit) is reused."""
    dbs = snakelab_tables
    (stored,) = insert_runs(dbs, SCHEMA, BASELINE, status="queued")
    async with submitter(dbs, lambda config: pytest.fail("submitted again")) as (once, peer, _):
        assert await once.reuse_or_submit(BASELINE, "seeding", "x") == (stored, False)
    assert submits(peer) == []


async def test_a_failed_run_is_not_reused_and_a_refused_config_stops(snakelab_tables):
    """Only runs that may still score are reused; SnakeLab refusing the configuration is
    SubmissionRefused, after one submit."""
    dbs = snakelab_tables
    insert_runs(dbs, SCHEMA, BASELINE, status="failed")
    refusal = refused("invalid_config", "the seed is out of range")
    async with submitter(dbs, lambda config: refusal) as (once, peer, _):
        with pytest.raises(SubmissionRefused, match="the seed is out of range"):
            await once.reuse_or_submit(BASELINE, "seeding", "x")
    assert len(submits(peer)) == 1
