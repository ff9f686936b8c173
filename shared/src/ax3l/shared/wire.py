"""Strict wire models: the tool channel (MCP child <-> toolbroker) and SnakeLab's control socket.

Strict means what the contract says: ``protocol_version`` is the integer 1 (not ``true``, not
``"1"``), numbers are never booleans or strings, NaN and infinities are refused, and an extra
or missing key is an error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

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

if TYPE_CHECKING:
    from ax3l.shared.registry import Entry


def _exactly_one(value: Any) -> Any:
    if type(value) is not int or value != 1:
        raise ValueError(f"protocol_version must be the integer 1, got {value!r}")
    return value


def printable(value: Any, limit: int = 80) -> str:
    """A short, encodable rendering of a caller-supplied value for messages and events."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    # Lone surrogates (from "\ud800" escapes) cannot be stored or sent as UTF-8.
    return text.encode("utf-8", "replace").decode("utf-8")


def number_problem(field: str, value: Any) -> str | None:
    """Why ``value`` is not a finite JSON number, or None if it is one: the one check of a
    submitted value (the MCP tools before forwarding, the broker before anything else, and
    ``FiniteNumber`` here)."""
    if isinstance(value, bool):
        return f"{field} must be a JSON number, not the boolean {printable(value)}"
    if isinstance(value, str):
        return f"{field} must be a JSON number, not the string {printable(value)}"
    if value is None:
        return f"{field} must be a JSON number, not null"
    if isinstance(value, int):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"{field} must be a finite number, not {printable(value)}"
        return None
    return f"{field} must be a JSON number, not {printable(value)}"


def _finite(value: float | int) -> float | int:
    problem = number_problem("value", value)
    if problem:
        raise ValueError(problem)
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
    """``submit_single_value``'s payload: the entry's name, then its value."""

    parameter: Name
    value: FiniteNumber


class SubmitPairValuesPayload(StrictModel):
    """``submit_pair_values``'s payload: the pair's name, then its two values."""

    pair: Name
    value_1: FiniteNumber
    value_2: FiniteNumber


# The submit contract, by tool method (``Entry.tool_name``): the payload's fields, in order.
SUBMIT_PAYLOADS: dict[str, type[StrictModel]] = {
    "submit_single_value": SubmitSingleValuePayload,
    "submit_pair_values": SubmitPairValuesPayload,
}


def payload_fields(method: str) -> tuple[str, ...]:
    """The exact fields of a submit method's payload: the name field, then the values."""
    return tuple(SUBMIT_PAYLOADS[method].model_fields)


def payload_for(entry: Entry, values: Mapping[str, Any]) -> dict[str, Any]:
    """The payload an MCP server forwards for ``entry``'s tool call with ``values`` (by argument
    name): ``{"parameter": "gamma", "value": 0.97}`` or ``{"pair": ..., "value_1", "value_2"}``,
    validated against the contract (``ValidationError`` for a value that breaks it)."""
    name_field, *value_names = payload_fields(entry.tool_name)
    payload = {name_field: entry.name, **{name: values[name] for name in value_names}}
    return SUBMIT_PAYLOADS[entry.tool_name].model_validate(payload).model_dump()


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
