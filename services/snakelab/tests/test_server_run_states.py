"""The reference SnakeLab's own choices on run states, and what it stores for each."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from ax3l.shared.snakelab_client import SnakeLabClient, SnakeLabError
from ax3l.shared.waiting import wait_until_async
from ax3l.shared.wire import RunStatus
from ax3l.testing.databases import TestDatabases as Databases
from ax3l.testing.snakelab_process import (
    ScratchDatabase,
    SnakeLabProcess,
    scratch_snakelab_database,
)


@pytest.fixture(scope="module")
def slow_lab(db_env: dict[str, str]) -> Iterator[tuple[SnakeLabProcess, ScratchDatabase]]:
    """A surrogate SnakeLab whose runs take two minutes (so they can be paused and cancelled)."""
    with (
        scratch_snakelab_database(db_env) as database,
        SnakeLabProcess(database.env(), trainer="surrogate", seconds=120) as server,
    ):
        yield server, database


@pytest.fixture
async def lab(slow_lab: tuple[SnakeLabProcess, ScratchDatabase]) -> Any:
    server, database = slow_lab
    client = SnakeLabClient(server.endpoint)
    yield client, database
    # Leave the server idle for the next test.
    while (active := await client.active()) is not None:
        with contextlib.suppress(SnakeLabError):
            await client.cancel(active.run_id)
        await asyncio.sleep(0.01)


def stored(database: ScratchDatabase, run_id: str) -> tuple[str, int | None]:
    with contextlib.closing(database.connect()) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT status, episode_count FROM simulation_runs WHERE run_id = %s", (run_id,)
        )
        status, count = cur.fetchone()
        return status, count


async def until(client: SnakeLabClient, run_id: str, predicate: Any) -> RunStatus:
    async def there() -> RunStatus | None:
        status = await client.status(run_id)
        return status if predicate(status) else None

    found: RunStatus = await wait_until_async(there, 20, "the run's state", interval=0.01)
    return found


async def test_pause_and_resume_are_stored_and_repeatable(lab: Any) -> None:
    """Pause/resume show in the row; pausing twice or resuming a running run just answers."""
    client, database = lab
    run_id = (await client.submit({})).run_id
    await until(client, run_id, lambda s: s.completed_epochs >= 1)
    assert stored(database, run_id)[0] == "running"

    assert (await client.pause(run_id)).state == "paused"
    assert (await client.pause(run_id)).state == "paused"
    assert stored(database, run_id)[0] == "paused"

    assert (await client.resume(run_id)).state == "running"
    assert (await client.resume(run_id)).state == "running"
    assert stored(database, run_id)[0] == "running"


async def test_a_paused_run_has_its_episodes_stored(lab: Any) -> None:
    """Before a run blocks on pause, every episode it finished is in the database."""
    client, database = lab
    run_id = (await client.submit({})).run_id
    await until(client, run_id, lambda s: s.completed_epochs >= 2)
    await client.pause(run_id)

    async def episodes_stored() -> bool:
        status = await client.status(run_id)
        return stored(database, run_id) == ("paused", status.completed_epochs)

    await wait_until_async(
        episodes_stored, 5, "the paused run's episodes to be stored", interval=0.01
    )


async def test_a_queued_run_cannot_be_paused_or_resumed(lab: Any) -> None:
    """Only a running run pauses and only a paused one resumes: queued is invalid_run_state."""
    client, _ = lab
    await client.submit({"seed": 1})
    queued = (await client.submit({"seed": 2})).run_id
    for call in (client.pause, client.resume):
        with pytest.raises(SnakeLabError) as caught:
            await call(queued)
        assert caught.value.code == "invalid_run_state"


async def test_cancel_passes_through_cancelling_to_cancelled_in_the_row(lab: Any) -> None:
    """A cancelled running run ends as a cancelled row with its completion time."""
    client, database = lab
    run_id = (await client.submit({})).run_id
    await until(client, run_id, lambda s: s.completed_epochs >= 1)
    assert (await client.cancel(run_id)).state in ("cancelling", "cancelled")
    final = await until(client, run_id, lambda s: s.terminal)
    assert final.state == "cancelled"
    assert stored(database, run_id) == ("cancelled", final.completed_epochs)


async def test_snapshot_is_unavailable_until_a_run_completes(lab: Any) -> None:
    """simulation.snapshot of a queued, running or cancelled run is snapshot_unavailable."""
    client, _ = lab
    running = (await client.submit({"seed": 1})).run_id
    queued = (await client.submit({"seed": 2})).run_id
    await until(client, running, lambda s: s.completed_epochs >= 1)
    for run_id in (running, queued):
        with pytest.raises(SnakeLabError) as caught:
            await client.call("simulation.snapshot", {"run_id": run_id})
        assert caught.value.code == "snapshot_unavailable"
    await client.cancel(running)
    await until(client, running, lambda s: s.terminal)
    with pytest.raises(SnakeLabError) as caught:
        await client.call("simulation.snapshot", {"run_id": running})
    assert caught.value.code == "snapshot_unavailable"


async def test_snapshot_of_a_completed_run_is_the_stored_best_game(
    snakelab_tables: Databases,
) -> None:
    """simulation.snapshot answers the same best-game board the row stores."""
    with SnakeLabProcess(snakelab_tables.env(), trainer="surrogate", seconds=0) as server:
        client = SnakeLabClient(server.endpoint)
        run_id = (await client.submit({"epochs": 500})).run_id
        status = await until(client, run_id, lambda s: s.terminal)
        reply = await client.call("simulation.snapshot", {"run_id": run_id})
    [(snapshot_json,)] = snakelab_tables.query(
        "SELECT high_score_snapshot FROM simulation_runs WHERE run_id = %s", (run_id,), "snakelab"
    )
    assert reply == {"run_id": run_id, "snapshot": json.loads(snapshot_json)}
    assert reply["snapshot"]["board"]["score"] == status.high_score


async def test_frames_are_unavailable_for_every_run(lab: Any) -> None:
    """simulation.frames: frames_unavailable for a known run, run_not_found for an unknown one."""
    client, _ = lab
    run_id = (await client.submit({})).run_id
    with pytest.raises(SnakeLabError) as caught:
        await client.call("simulation.frames", {"run_id": run_id})
    assert caught.value.code == "frames_unavailable"
    with pytest.raises(SnakeLabError) as caught:
        await client.call("simulation.frames", {"run_id": "no-such-run"})
    assert caught.value.code == "run_not_found"
