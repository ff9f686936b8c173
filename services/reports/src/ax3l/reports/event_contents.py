"""Reading event contents for display: JSON or text, llama-server replies, short summaries.

Contents are untrusted (LLM text, prompts, configs): this module only reshapes them; the
templates escape everything they print.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ax3l.shared.events import CATALOG

# Labels of the event filter; the user's page calls prompt_sent "Prompt".
LABELS: dict[str, str] = {
    "prompt_sent": "Prompt",
    "reply_received": "Reply",
    "conversation_started": "Conversation started",
    "conversation_ended": "Conversation ended",
    "llm_request_failed": "LLM request failed",
}


def label(name: str) -> str:
    """The display label of an event name."""
    return LABELS.get(name) or name.replace("_", " ").capitalize()


def event_choices() -> list[tuple[str, str, str]]:
    """``(name, label, category)`` of every catalog event, in catalog order."""
    return [(name, label(name), str(category)) for name, (category, _) in CATALOG.items()]


def parse(content: str | None) -> Any:
    """The content as JSON when it is a JSON object or array, else the text itself."""
    if content is None:
        return None
    text = content.strip()
    if text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return content
    return content


def pretty(value: Any) -> str:
    """JSON for reading (indented, non-ASCII kept); text stays as it is."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


@dataclass
class ToolCall:
    name: str
    arguments: Any  # parsed JSON when the model sent valid JSON, else the raw string


@dataclass
class Reply:
    """The parts of a llama-server chat completion that the report shows."""

    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    message: str | None = None
    finish_reason: str | None = None
    model: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)


def read_reply(content: Any) -> Reply | None:
    """A reply's parts, or None when the content is not a chat completion."""
    if not isinstance(content, dict):
        return None
    choices = content.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else {}
    if not isinstance(choice, dict):
        choice = {}
    found = choice.get("message")
    message: dict[str, Any] = found if isinstance(found, dict) else {}
    reply = Reply(
        reasoning=_text(message.get("reasoning_content")),
        message=_text(message.get("content")),
        finish_reason=_text(choice.get("finish_reason")),
        model=_text(content.get("model")),
        usage=_scalars(content.get("usage")),
        timings=_scalars(content.get("timings")),
    )
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        reply.tool_calls.append(ToolCall(str(function.get("name", "?")), arguments))
    if not (reply.tool_calls or reply.message or reply.reasoning or reply.usage or choices):
        return None
    return reply


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _scalars(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {}
    return {
        str(key): item
        for key, item in value.items()
        if isinstance(item, (int, float, str)) and not isinstance(item, bool)
    }


def compact(value: Any) -> str:
    """One-line JSON for summaries."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def summary(name: str, content: str | None, limit: int = 160) -> str:
    """A one-line description of an event's content for the list."""
    if content is None:
        return ""
    if name == "reply_received":
        reply = read_reply(parse(content))
        if reply is not None:
            if reply.tool_calls:
                text = "; ".join(f"{c.name} {compact(c.arguments)}" for c in reply.tool_calls)
            else:
                text = "no tool call: " + (reply.message or reply.finish_reason or "")
            return _cut(text, limit)
    if name == "prompt_sent":
        first = next((line for line in content.splitlines() if line.strip()), "")
        return _cut(first.strip(), limit)
    return _cut(" ".join(content.split()), limit)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


RUN_KEYS = ("run_id", "golden_run_id", "latest_run_id", "current_golden_run_id")


def run_links(content: Any) -> list[tuple[str, str]]:
    """``(key, run_id)`` for each run reference in an object content (for links)."""
    if not isinstance(content, dict):
        return []
    return [
        (key, value)
        for key in RUN_KEYS
        if isinstance(value := content.get(key), str) and 0 < len(value) <= 36
    ]
