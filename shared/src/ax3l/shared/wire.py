"""Strict wire models: the tool channel (MCP child <-> toolbroker) and SnakeLab's control socket.

Strict means what the contract says: ``protocol_version`` is the integer 1 (not ``true``, not
``"1"``), numbers are never booleans or strings, NaN and infinities are refused, and an extra
or missing key is an error.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
)


def _exactly_one(value: Any) -> Any:
    if type(value) is not int or value != 1:
        raise ValueError(f"protocol_version must be the integer 1, got {value!r}")
    return value


def _finite(value: float | int) -> float | int:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    return value


ProtocolVersion = Annotated[Literal[1], BeforeValidator(_exactly_one)]
FiniteNumber = Annotated[StrictInt | StrictFloat, AfterValidator(_finite)]
Name = Annotated[StrictStr, Field(min_length=1, max_length=100)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# -- tool channel ----------------------------------------------------------------------------


class ToolEnvelope(StrictModel):
    """One message on the tool channel, request or reply."""

    protocol_version: ProtocolVersion
    sender: Name
    target: Name
    method: Name
    payload: dict[str, Any]


class SubmitSingleValuePayload(StrictModel):
    parameter: Name
    value: FiniteNumber


class SubmitPairValuesPayload(StrictModel):
    pair: Name
    value_1: FiniteNumber
    value_2: FiniteNumber


ToolErrorCode = Literal["invalid_request", "unknown_method", "handler_error"]


class ToolErrorBody(StrictModel):
    code: ToolErrorCode
    message: StrictStr


class ToolError(StrictModel):
    """Payload of a protocol-level error reply on the tool channel."""

    error: ToolErrorBody


# -- SnakeLab control socket ------------------------------------------------------------------

SnakeLabErrorCode = Literal[
    "invalid_request",
    "unsupported_protocol",
    "unknown_method",
    "invalid_config",
    "run_not_found",
    "invalid_run_state",
    "snapshot_unavailable",
    "frames_unavailable",
]
RunState = Literal["queued", "running", "paused", "cancelling", "completed", "failed", "cancelled"]
TERMINAL_STATES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
Outcome = Literal["empty", "food", "wall", "snake", "max_moves", "board_filled"]


class ControlRequest(StrictModel):
    """A request on SnakeLab's control socket: exactly these four keys."""

    protocol_version: ProtocolVersion
    request_id: Annotated[StrictStr, Field(min_length=1, max_length=128)]
    method: StrictStr
    payload: dict[str, Any]


class ControlErrorBody(StrictModel):
    code: SnakeLabErrorCode
    message: StrictStr


class ControlOk(StrictModel):
    protocol_version: ProtocolVersion
    request_id: StrictStr
    status: Literal["ok"]
    payload: dict[str, Any]


class ControlError(StrictModel):
    protocol_version: ProtocolVersion
    request_id: StrictStr | None
    status: Literal["error"]
    error: ControlErrorBody


class LastEpisode(StrictModel):
    episode: StrictInt
    seed: StrictInt
    score: StrictInt
    reward: FiniteNumber
    steps: StrictInt
    outcome: Outcome
    epsilon: FiniteNumber | None
    epsilon_injections: StrictInt
    loss: FiniteNumber | None


class RunStatus(StrictModel):
    """SnakeLab's status object for one run."""

    run_id: StrictStr
    state: RunState
    epochs: StrictInt
    completed_epochs: StrictInt
    total_steps: StrictInt
    high_score: StrictInt | None
    total_reward: FiniteNumber
    epsilon_injections: StrictInt
    last_loss: FiniteNumber | None
    move_delay_ms: FiniteNumber
    last_episode: LastEpisode | None
    error: StrictStr | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


class SubmitReply(StrictModel):
    run_id: StrictStr
    state: Literal["queued"]
    queue_position: StrictInt


class HealthReply(StrictModel):
    service: StrictStr
    project_version: StrictStr


class ActiveReply(StrictModel):
    run: RunStatus | None
