"""S143: an unexpected failure of a loop step is retried, but not for ever: the same one (its
type and place) ``AX3L_UNEXPECTED_FAILURE_LIMIT`` times in a row stops the loop with a message
that names it, which main turns into exit 1 and the "loop stopped" alert."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from ax3l.orchestrator.loop import FATAL, ExperimentLoop, RepeatedFailure
from ax3l.orchestrator.main import _loop_ended
from ax3l.orchestrator.status import LoopStatus
from ax3l.shared.settings import Settings


class ScriptedLoop(ExperimentLoop):
    """A loop whose steps do what ``outcomes`` says, one per step attempt: an exception to
    raise, or None for a step that goes through; it records the attempts."""

    outcomes: list[BaseException | None]

    async def step(self) -> None:
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome


def scripted(outcomes: Sequence[BaseException | None], limit: int = 4) -> ScriptedLoop:
    settings = Settings(AX3L_RETRY_BACKOFF_MAX=0.001, AX3L_UNEXPECTED_FAILURE_LIMIT=limit)
    runs: Any = SimpleNamespace(
        db=SimpleNamespace(disk_full=SimpleNamespace(describe=lambda: None))
    )
    loop = ScriptedLoop(settings, runs, None, LoopStatus("p-1", "random"), "p-1", None)  # type: ignore[arg-type]
    loop.outcomes = list(outcomes)
    return loop


def a_bug(run_id: str) -> KeyError:
    """The same bug each time (one place in this file), with a message that varies."""
    try:
        raise KeyError(run_id)
    except KeyError as exc:
        return exc


async def test_the_same_unexpected_failure_stops_the_loop_at_the_limit_naming_it() -> None:
    """Four identical failures (messages differ, place and type the same) stop the loop with
    RepeatedFailure, a FATAL error whose message names the type, the place and the last message;
    main says it on stderr and exits 1."""
    loop = scripted([a_bug(f"run-{n}") for n in range(10)], limit=4)
    with pytest.raises(RepeatedFailure) as stopped:
        await loop.run()
    assert isinstance(stopped.value, FATAL)
    assert len(loop.outcomes) == 6  # four attempts, then the stop
    message = str(stopped.value)
    assert "4 times in a row" in message
    assert "KeyError at test_unexpected_failures.py:" in message and "'run-3'" in message
    assert "AX3L_UNEXPECTED_FAILURE_LIMIT=4" in message
    status = LoopStatus("p-1", "random")
    assert _loop_ended(stopped.value, status) == 1 and status.stop_reason == message


async def test_a_step_that_goes_through_or_another_failure_starts_the_count_again() -> None:
    """Three identical failures, a step that goes through, three more: the loop goes on; a
    different failure in between also starts the count again; failed conversations and
    other expected failures are never counted."""
    from ax3l.orchestrator.proposers import ConversationFailed

    other = ValueError("elsewhere")
    loop = scripted(
        [a_bug("a"), a_bug("b"), a_bug("c"), None]
        + [a_bug("d"), a_bug("e"), other, a_bug("f"), a_bug("g"), None]
        + [ConversationFailed("model timeout")] * 6
        + [None],
        limit=4,
    )
    for _ in range(3):
        await loop.step_with_backoff()
    assert loop.outcomes == [] and loop.steps == 3
