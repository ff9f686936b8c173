"""The fallback pairs without a stack: who speculates, who proposes, what the hand-over says."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from ax3l.orchestrator.proposers.base import (
    ConversationFailed,
    Proposer,
    ProposerDeps,
    TurnAhead,
    TurnContext,
)
from ax3l.orchestrator.proposers.external import ExternalWithFallback, NoSeatSubmitted
from ax3l.orchestrator.proposers.fallback import ModelWithFallback
from ax3l.orchestrator.status import LoopStatus

CTX = cast(TurnContext, SimpleNamespace(turn=SimpleNamespace(entry=SimpleNamespace(name="gamma"))))
AHEAD = cast(TurnAhead, SimpleNamespace())


class StreakDb:
    """Answers failure_streak's two queries: no turn moved yet, ``streak`` failed conversations."""

    def __init__(self, streak: int) -> None:
        self.streak = streak

    async def fetchall(self, sql: str, params: Any = None, doing: str = "") -> list[dict[str, int]]:
        return [{"n": self.streak}] if "COUNT" in sql else []


class Scripted(Proposer):
    """A proposer that records its calls and answers ``run_id`` or raises ``error``."""

    def __init__(self, deps: ProposerDeps, name: str, error: BaseException | None = None):
        super().__init__(deps)
        self.name = name
        self.error = error
        self.notes: list[dict[str, Any] | None] = []
        self.speculated: list[TurnAhead] = []

    async def speculate(self, ahead: TurnAhead, note: dict[str, Any] | None = None) -> None:
        self.speculated.append(ahead)

    def held_entry(self) -> str | None:
        return "gamma" if self.speculated else None

    async def propose(self, ctx: TurnContext, note: dict[str, Any] | None = None) -> str:
        self.notes.append(note)
        if self.error is not None:
            raise self.error
        return f"run-of-{self.name}"

    async def converse(self, ctx: TurnContext, conversation_id: str, started_event_id: int) -> str:
        raise NotImplementedError


def deps(streak: int = 0) -> ProposerDeps:
    fields: dict[str, Any] = dict.fromkeys(ProposerDeps.__dataclass_fields__)
    fields.update(db=StreakDb(streak), status=LoopStatus("loop", "llm"))
    return ProposerDeps(**fields)


async def test_the_model_speculates_only_while_its_streak_is_below_the_limit() -> None:
    """A pipelined turn is started with the model below its streak, and not at it."""
    for streak, expected in ((1, 1), (2, 0)):
        d = deps(streak)
        model = Scripted(d, "llm")
        pair = ModelWithFallback(d, model, Scripted(d, "tpe"), after=2)
        await pair.speculate(AHEAD)
        assert len(model.speculated) == expected
        assert pair.held_entry() == ("gamma" if expected else None)


async def test_the_model_hands_a_turn_over_with_its_name_and_streak() -> None:
    """At the streak limit the fallback proposes, its note naming the model and the streak."""
    d = deps(streak=2)
    model, tpe = Scripted(d, "llm"), Scripted(d, "tpe")
    pair = ModelWithFallback(d, model, tpe, after=2)
    assert await pair.propose(CTX, {"hybrid_role": "model"}) == "run-of-tpe"
    assert model.notes == []
    assert tpe.notes == [{"hybrid_role": "model", "fallback_for": "llm", "failure_streak": 2}]
    assert list(tpe.notes[0] or {}) == ["hybrid_role", "fallback_for", "failure_streak"]
    status = d.status
    assert (status.fallback_proposer, status.llm_fallback_after, status.failure_streak) == (
        "tpe",
        2,
        0,
    )
    assert pair.name == "llm"


async def test_the_seats_hand_over_only_a_turn_no_seat_answered() -> None:
    """No seat by the deadline: the fallback proposes in the same attempt, saying how long it
    waited; any other failure of the seats' turn goes back to the loop."""
    d = deps()
    silent = ConversationFailed("deadline")
    silent.__cause__ = NoSeatSubmitted("no seat")
    seats, tpe = Scripted(d, "external", silent), Scripted(d, "tpe")
    pair = ExternalWithFallback(d, seats, tpe, deadline=0.5)
    assert await pair.propose(CTX) == "run-of-tpe"
    assert tpe.notes == [{"fallback_for": "external", "waited_seconds": 0.5}]

    broken = ExternalWithFallback(d, Scripted(d, "external", ConversationFailed("bad")), tpe, 0.5)
    with pytest.raises(ConversationFailed, match="bad"):
        await broken.propose(CTX)
    assert len(tpe.notes) == 1
