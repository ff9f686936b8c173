"""Exactly once across crashes and lost answers: the one way Ax3l sends ``simulation.submit``.

SnakeLab runs every valid submit it receives, so no submit is ever resent blindly. Both
submitters build on the same two pieces:

* ``send_once``: one ``simulation.submit``, whose outcome is ``Sent`` (SnakeLab's reply),
  ``Refused`` (SnakeLab answered with an error, so no run was created) or ``Unknown`` (no
  usable answer: SnakeLab may or may not have created the run).
* ``created_runs``: the stored runs of a configuration that are newer than a position of the
  configuration index noted before the send (``ConfigIndex.position``). That is where the run
  of an ``Unknown`` send, or of a send the process died right after, is found.

Who uses them:

* The broker, for proposals (``toolbroker/submission.py``): a durable intent records the
  position before ``send_once``; ``ax3l.shared.intents.reconcile`` adopts the intent's run from
  ``created_runs`` after a crash or an ``Unknown``, and never sends again.
* The orchestrator, for its own runs (``orchestrator/submission.py:OnceSubmitter``: seeding,
  seed baselines, infrastructure retries): their configurations are deterministic, so a stored
  usable run of the configuration is reused instead of sending; after an ``Unknown`` it waits
  until SnakeLab answers and takes the run from ``created_runs`` before anything is sent again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import ValidationError

from ax3l.shared.config_index import ConfigIndex, IndexedRun
from ax3l.shared.snakelab_client import (
    SnakeLabClient,
    SnakeLabError,
    SnakeLabProtocolError,
    SnakeLabUnavailable,
    SubmitReply,
)


@dataclass(frozen=True)
class Sent:
    """SnakeLab accepted the configuration and created ``reply.run_id``."""

    reply: SubmitReply


@dataclass(frozen=True)
class Refused:
    """SnakeLab answered with an error: no run was created."""

    error: SnakeLabError


@dataclass(frozen=True)
class Unknown:
    """No usable answer (timeout, connection, malformed reply): the run may exist."""

    problem: str


SendOutcome: TypeAlias = Sent | Refused | Unknown


async def send_once(client: SnakeLabClient, config: dict[str, Any]) -> SendOutcome:
    """One ``simulation.submit`` of ``config``; never retried here or by any caller."""
    try:
        return Sent(await client.submit(config))
    except SnakeLabError as exc:
        return Refused(exc)
    except (SnakeLabUnavailable, SnakeLabProtocolError) as exc:
        return Unknown(str(exc))
    except ValidationError:
        return Unknown("SnakeLab's reply to simulation.submit is malformed")


async def created_runs(
    index: ConfigIndex, config: Mapping[str, Any], after_id: int
) -> list[IndexedRun]:
    """Stored runs of ``config`` with a SnakeLab id above ``after_id``, oldest first."""
    return [run for run in await index.find_indexed(config) if run.sl_id > after_id]
