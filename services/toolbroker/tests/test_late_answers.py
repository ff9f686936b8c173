"""A SnakeLab that answers a submission late: the broker settles the outcome before it replies.

The stand-in SnakeLab stores the run in the module SnakeLab's tables itself (as SnakeLab does
before it answers) and then answers late, or drops the submit unprocessed; ``health`` is answered
at once, in order, as SnakeLab handles its requests one at a time.
"""

import time
from typing import Any

from broker_harness import broker_on, events, sql

import ax3l.shared.db.intents as intents
from ax3l.testing.zmq_peer import ScriptedPeer, ok, snakelab_reply

FAST = {"AX3L_SNAKELAB_TIMEOUT": "0.3", "AX3L_SUBMIT_SETTLE_WAIT": "3"}


class LateLab(ScriptedPeer):
    """Answers ``health``; stores each submit's run and answers ``late[i]`` s later, or drops
    the i-th submit unprocessed when that is None."""

    def __init__(self, lab: Any, late: list[float | None]):
        self.lab = lab
        self.late = late
        self.run_ids: list[str] = []
        super().__init__(self._answer)

    def submits(self) -> int:
        return sum(1 for r in self.requests if r.get("method") == "simulation.submit")

    def _answer(self, request: dict[str, Any]) -> dict[str, Any] | None:
        if request.get("method") != "simulation.submit":
            return snakelab_reply(request, ok({"service": "snake-lab", "project_version": "t"}))
        delay = self.late[self.submits() - 1]
        if delay is None:
            return None
        config = request["payload"]["config"]
        run_id = self.lab.insert_run(config, status="queued")
        self.run_ids.append(run_id)
        time.sleep(delay)
        return snakelab_reply(
            request, ok({"run_id": run_id, "state": "queued", "queue_position": 0})
        )


def intent_states(databases) -> list[str]:
    return [
        row[0] for row in sql(databases, "SELECT state FROM submission_intents ORDER BY intent_id")
    ]


async def test_a_run_answered_after_the_timeout_is_the_accepted_proposal(databases, lab, golden):
    """SnakeLab stores the run and answers 1 s after the 0.3 s timeout: the reply accepts the
    proposal with that run (adopted, its two events once), and nothing is sent twice."""
    late = LateLab(lab, [1.0])
    async with broker_on(late, databases, lab, **FAST) as broker:
        reply = await broker.single("gamma", 0.951)
    (run_id,) = late.run_ids
    assert reply == {"status": "ok", "run_id": run_id}
    assert late.submits() == 1
    logged = events(databases, "proposal_accepted", "simulation_submitted")
    assert [(e["name"], e["process_id"], e["content"]["adopted"]) for e in logged] == [
        ("proposal_accepted", run_id, True),
        ("simulation_submitted", run_id, True),
    ]
    assert intent_states(databases) == [intents.ADOPTED]


async def test_a_submit_snakelab_never_processed_is_closed_and_the_turn_stays_open(
    databases, lab, golden
):
    """SnakeLab drops the submit and answers again at once: the reply says nothing was submitted,
    the intent is closed, and the next proposal of the same turn is accepted."""
    late = LateLab(lab, [None, 0.0])
    async with broker_on(late, databases, lab, **FAST) as broker:
        first = await broker.single("gamma", 0.952)
        second = await broker.single("gamma", 0.953, open_turn=False)
    message = first["error"]["message"]
    assert first["error"]["code"] == "handler_error"
    assert "nothing was submitted" in message and "answered again" in message
    (run_id,) = late.run_ids
    assert second == {"status": "ok", "run_id": run_id}
    assert intent_states(databases) == [intents.ABANDONED, intents.DONE]


async def test_a_broker_held_up_past_the_send_window_sends_nothing(
    databases, lab, golden, monkeypatch
):
    """A broker that reaches the send only after ``SEND_WINDOW`` (frozen, or a slow database)
    closes the intent unsent: the orchestrator may already have settled it as not created."""
    monkeypatch.setattr(intents, "SEND_WINDOW", 0.0)
    late = LateLab(lab, [0.0])
    async with broker_on(late, databases, lab, **FAST) as broker:
        reply = await broker.single("gamma", 0.954)
    assert "the submission was not sent" in reply["error"]["message"]
    assert late.submits() == 0
    assert intent_states(databases) == [intents.ABANDONED]
