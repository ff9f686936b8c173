"""A database that fails under a running server: clear error replies, the server stays up."""

from __future__ import annotations

import pytest

from ax3l.shared.snakelab_client import SnakeLabClient, SnakeLabError
from ax3l.testing.databases import TestDatabases as Databases
from ax3l.testing.snakelab_process import SnakeLabProcess


async def test_a_submit_that_cannot_be_stored_is_refused_with_the_reason(
    snakelab_tables: Databases,
) -> None:
    """With SnakeLab's tables gone, submit answers a server error and no run is queued."""
    with SnakeLabProcess(snakelab_tables.env(), trainer="surrogate") as server:
        client = SnakeLabClient(server.endpoint)
        snakelab_tables.query(
            "DROP TABLE simulation_episodes, configurations, simulation_runs",
            database=snakelab_tables.snakelab_db,
        )
        with pytest.raises(SnakeLabError) as caught:
            await client.submit({})
        assert caught.value.code == "invalid_request"
        assert caught.value.message.startswith("server error: storing run ")
        assert "doesn't exist" in caught.value.message
        assert await client.active() is None
        assert (await client.health()).service == "snake-lab"
