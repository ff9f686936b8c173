"""Test-only crash hooks: ``AX3L_TEST_CRASH_AT=<point>[@n][,<point>[@n]...]`` kills the process
with SIGKILL the n-th time (default: the first time) it reaches a named point, so crash tests
hit exact moments. One mechanism for every service: the orchestrator and the toolbroker arm
the points named in their own environment at start (``arm(armed_points())``).

Points (in the order a turn meets them; the broker's is ``broker_after_submit``):

* ``seeding_after_submit``: the default config was submitted, its submission not yet recorded.
* ``seeding_waiting``: the seeding run is recorded and being waited on.
* ``after_checkpoint``: a ``round_robin_checkpoint`` was written, nothing else of the turn.
* ``model_call``: the prompts are stored and the request to the model is about to be sent.
* ``broker_after_submit`` (toolbroker): SnakeLab accepted the proposal's run and the broker
  has written nothing about it (no ``proposal_accepted``): the restart adopts it exactly once.
* ``after_tool_accepted``: the broker accepted the proposal (``proposal_accepted`` is stored)
  and the orchestrator has not recorded anything about the reply.
* ``waiting``: a proposal's run is being waited on.
* ``retry_after_submit``: a run that never trained was submitted again, the retry not yet
  recorded.
* ``confirmation_started`` (``AX3L_PROMOTION=confirm``): ``promotion_confirmation_started``
  is stored, no confirmation run is submitted.
* ``confirmation_before_submit``: a confirmation run is about to be submitted (seeding's and a
  rotation's confirmation runs pass here too).
* ``confirmation_after_submit``: a confirmation run was submitted, its submission not recorded.
* ``confirmation_waiting``: a confirmation run is recorded and being waited on.
* ``race_round_logged`` (``AX3L_PROMOTION=race``): a round's ``promotion_race_round`` is
  stored, the next round's runs not submitted (or the decision not stored).
* ``confirmation_decided``: ``promotion_confirmation_decided`` is stored, the comparison not.
* ``after_comparison``: ``configuration_compared`` is stored, promotion/retention is not.
* ``after_model_golden`` (``AX3L_GOLDEN=model``): the golden that follows the model is stored,
  nothing after it.
* ``rotation_started``: ``seed_rotation_started`` is stored, nothing else of the rotation.
* ``rotation_after_submit``: the rotation run was submitted, its submission not yet recorded.
* ``rotation_waiting``: the rotation run is recorded and being waited on.
* ``adopt_before_commit`` (``ax3l-db adopt``): the adopted golden's event, message and score
  row are written, their transaction not committed.

Unset in production; an unknown name is refused at startup so a typo cannot hide a test gap.
"""

from __future__ import annotations

import os
import signal

POINTS = frozenset(
    {
        "seeding_after_submit",
        "seeding_waiting",
        "after_checkpoint",
        "model_call",
        "broker_after_submit",
        "after_tool_accepted",
        "waiting",
        "retry_after_submit",
        "confirmation_started",
        "confirmation_before_submit",
        "confirmation_after_submit",
        "confirmation_waiting",
        "race_round_logged",
        "confirmation_decided",
        "after_comparison",
        "after_model_golden",
        "rotation_started",
        "rotation_after_submit",
        "rotation_waiting",
        "adopt_before_commit",
    }
)
ENV = "AX3L_TEST_CRASH_AT"


class UnknownCrashPoint(ValueError):
    """``AX3L_TEST_CRASH_AT`` names a point that does not exist."""


def armed_points(value: str | None = None) -> dict[str, int]:
    """``{point: n}`` from ``AX3L_TEST_CRASH_AT`` (or ``value``), checked against ``POINTS``."""
    text = os.environ.get(ENV, "") if value is None else value
    armed: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, count = part.partition("@")
        if name not in POINTS:
            raise UnknownCrashPoint(
                f"{ENV} names the unknown crash point {name!r}; known: {sorted(POINTS)}"
            )
        try:
            armed[name] = int(count) if count else 1
        except ValueError:
            raise UnknownCrashPoint(f"{ENV}: {part!r} needs a whole number after @") from None
    return armed


_armed: dict[str, int] = {}
_reached: dict[str, int] = {}


def arm(points: dict[str, int]) -> None:
    global _armed
    _armed = dict(points)
    _reached.clear()


def crash_point(name: str) -> None:
    """Die here with SIGKILL when this point is armed for this visit (never in production)."""
    assert name in POINTS, name
    if name in _armed:
        _reached[name] = _reached.get(name, 0) + 1
        if _reached[name] == _armed[name]:
            os.kill(os.getpid(), signal.SIGKILL)
