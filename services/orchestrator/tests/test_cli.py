"""The command line: refusals with clear messages, never a traceback."""

from __future__ import annotations

import pytest

from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import RoundRobinCheckpoint
from ax3l.testing.databases import TestDatabases
from ax3l.testing.stack import Stack

FIVE_ENTRY_ORDER = ["hidden_size", "sequence_length", "batch_size", "learning_rate", "gamma"]


async def test_a_changed_parameter_order_stops_with_the_reset_instruction(
    snakelab_tables: TestDatabases, stack: Stack
) -> None:
    """An old five-entry checkpoint is not upgraded: the loop stops and says to reset events."""
    async with Database(snakelab_tables.settings()) as db:
        await EventLog(db).log(RoundRobinCheckpoint(parameter_order=FIVE_ENTRY_ORDER, index=2))
    proc = stack.orchestrator("random")
    assert proc.wait(30) == 1
    output = proc.log_tail()
    assert "reset-events" in output and "Traceback" not in output
    assert [e.name for e in stack.events()] == ["round_robin_checkpoint"]


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        ({}, ["--proposer", "llm"], "needs a model server"),
        ({"AX3L_PROPOSER": "bayes"}, [], "is not a proposer"),
        ({"AX3L_TEST_CRASH_AT": "nowhere"}, [], "unknown crash point"),
        ({"AX3L_SCHEMA_PATH": "/nonexistent/schema.json"}, [], "cannot read SnakeLab schema"),
        # The broker's settle wait after a SnakeLab timeout must fit in the tool channel's.
        ({"AX3L_ZMQ_TIMEOUT": "10", "AX3L_SUBMIT_SETTLE_WAIT": "8"}, [], "is 11 s, more than"),
    ],
)
def test_bad_configuration_is_refused_with_exit_code_2(
    stack: Stack, env: dict[str, str], args: list[str], message: str
) -> None:
    """Configuration mistakes end at once with exit code 2 and a one-line reason."""
    proc = stack.orchestrator(None, env=env, args=args)
    assert proc.wait(30) == 2
    assert message in proc.log_tail() and "Traceback" not in proc.log_tail()
