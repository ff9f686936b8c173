"""Why an ask was wasted: one vocabulary for the events, ax3l-compare's counts and the benches.

An ask is a model request, or a proposal submitted to the broker; it is wasted when it does not
end in an accepted proposal. Its kind:

* ``no_tool_call``: the model answered in prose (under a grammar: not the arguments object);
* ``malformed_arguments``: a call whose arguments are not exactly the tool's, as numbers;
* ``wrong_tool``: a call of another tool, or several calls;
* ``invalid_value``: the broker refused a value (range, type, step);
* ``duplicate``: the broker refused a configuration already run (or the golden's own);
* ``timeout``: no reply within the request's or the conversation's deadline;
* ``token_cap``: the reply was cut at ``AX3L_LLM_MAX_TOKENS``;
* ``server_error``: the model server failed (HTTP error, no connection, an unreadable reply, a
  context overflow).

``llm_request_failed`` says its kind in ``wasted`` (``LlmRequestFailed``); the broker's
refusals are their events' names; an LLM conversation's ``conversation_ended`` counts its
wasted asks by kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

WASTE_KINDS = (
    "no_tool_call",
    "malformed_arguments",
    "wrong_tool",
    "invalid_value",
    "duplicate",
    "timeout",
    "token_cap",
    "server_error",
)

# ``ModelFailure.kind`` (llm_client.py) -> the waste kind; every other failure is the server's.
_FAILURES = {
    "no_tool_call": "no_tool_call",
    "wrong_arguments": "malformed_arguments",
    "wrong_tool": "wrong_tool",
    "length": "token_cap",
    "timeout": "timeout",
}
# The broker's refusals: its rejection codes and its events.
_CODES = {"invalid_value": "invalid_value", "duplicate_config": "duplicate"}
REJECTION_EVENTS = {
    "proposal_rejected_invalid": "invalid_value",
    "proposal_rejected_duplicate": "duplicate",
}


def failure_waste(kind: str | None) -> str:
    """The waste kind of a failed model request of ``kind`` (``llm_request_failed.kind``)."""
    return _FAILURES.get(kind or "", "server_error")


def rejection_waste(code: str | None) -> str:
    """The waste kind of a proposal the broker refused with ``code``."""
    return _CODES.get(code or "", "invalid_value")


def waste_of(event_name: str, content: Mapping[str, Any]) -> str | None:
    """The waste kind of an event, or None when the event wastes no ask."""
    if event_name == "llm_request_failed":
        said = content.get("wasted")
        return said if said in WASTE_KINDS else failure_waste(content.get("kind"))
    return REJECTION_EVENTS.get(event_name)
