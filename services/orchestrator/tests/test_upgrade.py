"""Upgrades keep the experiment (issue 26): a history in release 1's tables, refused by the
services until ``ax3l-db upgrade``, then resumed by the loop; the spec's reset cases stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from orchestrator_stack import new_run_compared

from ax3l.orchestrator.turns import ParameterOrderChanged, check_stored_order
from ax3l.shared.db.cli import upgrade_schema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import RoundRobinCheckpoint
from ax3l.testing.databases import TestDatabases, run_module
from ax3l.testing.release_1 import create_release_1, move_into_release_1
from ax3l.testing.stack import Stack, check_history

FIVE_ENTRY_ORDER = ["hidden_size", "sequence_length", "batch_size", "learning_rate", "gamma"]


@pytest.mark.long
def test_a_release_1_history_is_refused_upgraded_and_resumed(stack: Stack) -> None:
    """The loop's history moved into release 1's tables: the orchestrator and the broker refuse
    to start naming `ax3l-db upgrade`; after it the loop continues the same history (no
    seeding, the round robin where it was, every invariant kept)."""
    stack.start()
    proc = stack.orchestrator("random")
    stack.wait_for(lambda: stack.count("configuration_compared") >= 2, 90, "two turns", proc)
    assert proc.stop() == 0
    assert stack.broker is not None and stack.broker.stop() is not None
    before = [(e.event_id, e.name, e.content) for e in stack.events()]
    moved = move_into_release_1(stack.databases)
    assert moved["events"] == len(before) and moved["experiment_highscores"] >= 1

    refused = stack.orchestrator("random")
    assert refused.wait(60) == 2
    assert "run `ax3l-db upgrade`" in refused.log_tail(40)
    broker, _ = stack.spawn(
        "toolbroker", stack.folder / "toolbroker-refused.log", {"AX3L_TOOLBROKER_PORT": "0"}
    )
    assert broker.wait(60) != 0 and "run `ax3l-db upgrade`" in broker.log_tail(40)

    env = {**stack.databases.env(), "PATH": "/usr/bin:/bin"}
    upgraded = run_module("ax3l.shared.db.cli", "upgrade", env=env, timeout=60)
    assert upgraded.returncode == 0 and "from revision 0001" in upgraded.stdout, upgraded.stderr

    stack.start_broker()
    proc, _ = new_run_compared(stack)
    assert proc.stop() == 0
    after = stack.events()
    assert [(e.event_id, e.name, e.content) for e in after[: len(before)]] == before
    seeding = [e for e in after if e.source_name == "InitialSeeding"]
    assert len(seeding) == 1 and seeding[0].event_id <= before[-1][0]
    summary = check_history(stack)
    assert summary.steps == [i % 7 for i in range(len(summary.steps))]


async def test_old_five_entry_checkpoints_still_need_a_reset_after_an_upgrade(
    databases: TestDatabases, tmp_path: Path
) -> None:
    """The spec's reset cases stay: an upgraded release-1 history whose checkpoint has the old
    five-entry order is refused with the reset instruction, not migrated."""
    create_release_1(databases)
    async with Database(databases.settings()) as db:
        await EventLog(db).log(RoundRobinCheckpoint(parameter_order=FIVE_ENTRY_ORDER, index=2))
        assert "upgraded" in upgrade_schema(databases.settings())
        with pytest.raises(ParameterOrderChanged, match="reset"):
            await check_stored_order(db)
