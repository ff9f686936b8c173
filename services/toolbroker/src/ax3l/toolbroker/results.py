"""What a tool handler answers: an accepted run, a rejection with its correction prompt, or a
protocol failure (``invalid_request``, ``unknown_method``, ``handler_error``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ax3l.shared.event_models import ProposalRejected

ProtocolCode = Literal["invalid_request", "unknown_method", "handler_error"]


class ProtocolFailure(Exception):
    """The request cannot be answered with a handler result; the reply carries ``error``."""

    def __init__(self, code: ProtocolCode, message: str):
        self.code: ProtocolCode = code
        self.message = message
        super().__init__(f"{code}: {message}")

    @property
    def outcome(self) -> str:
        """The ``/api/status`` outcome name."""
        return self.code

    @property
    def log_level(self) -> str:
        """The level of its ``tool_execution_failed`` event."""
        return "ERROR" if self.code == "handler_error" else "WARNING"

    def payload(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}

    def event_details(self) -> dict[str, Any]:
        """What the ``tool_execution_failed`` content holds besides the reply payload."""
        return {}


class TurnRefused(ProtocolFailure):
    """The proposal is not for the live round-robin turn (another entry, a finished turn, no
    turn at all): nothing is validated or submitted.

    Not one of the spec's two rejection codes, since the value is not what is wrong and no
    correction prompt can fix it: the host sees a ``handler_error`` whose message names the
    current turn (the MCP tool marks it ``isError``), logged as a WARNING with ``details``.
    """

    def __init__(self, message: str, details: dict[str, Any]):
        super().__init__("handler_error", message)
        self.details = details

    @property
    def outcome(self) -> str:
        return "refused_turn"

    @property
    def log_level(self) -> str:
        return "WARNING"

    def event_details(self) -> dict[str, Any]:
        return {"turn_refusal": self.details}


@dataclass(frozen=True)
class Accepted:
    """SnakeLab queued the candidate as ``run_id``."""

    run_id: str

    @property
    def outcome(self) -> str:
        return "accepted"

    def payload(self) -> dict[str, Any]:
        return {"status": "ok", "run_id": self.run_id}


@dataclass(frozen=True)
class Rejected:
    """The proposal was refused; ``prompt`` is the correction the model reads next.

    ``content`` is the ``proposal_rejected_*`` event (its model names it) the dispatcher logs
    with the request's outcome, and ``parameter`` its parameter column.
    """

    code: Literal["invalid_value", "duplicate_config"]
    reason: str
    prompt: str
    source_name: str
    content: ProposalRejected
    parameter: str | None = None

    @property
    def outcome(self) -> str:
        return f"rejected_{self.code}"

    def payload(self) -> dict[str, Any]:
        return {
            "status": "rejected",
            "code": self.code,
            "reason": self.reason,
            "prompt": self.prompt,
            "source_name": self.source_name,
        }


HandlerResult = Accepted | Rejected
