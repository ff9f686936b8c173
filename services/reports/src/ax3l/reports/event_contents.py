"""Reading event contents for display: JSON or text, llama-server replies, short summaries.

Contents are untrusted (LLM text, prompts, configs): this module only reshapes them; the
templates escape everything they print.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from ax3l.reports.event_sentences import prompt_sent, sentence, values_text
from ax3l.reports.models.events import Reply, ToolCall
from ax3l.shared import untrusted_json
from ax3l.shared.db.event_reads import parse_message
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


# The one reading of a stored content (shared with every other reader of events).


def pretty(value: Any) -> str:
    """JSON for reading (indented, non-ASCII kept); text stays as it is."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


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
        tool_calls=_tool_calls(message.get("tool_calls")),
        reasoning=_text(message.get("reasoning_content")),
        message=_text(message.get("content")),
        finish_reason=_text(choice.get("finish_reason")),
        model=_text(content.get("model")),
        usage=_scalars(content.get("usage")),
        timings=_scalars(content.get("timings")),
    )
    if not (reply.tool_calls or reply.message or reply.reasoning or reply.usage or choices):
        return None
    return reply


def _tool_calls(calls: Any) -> list[ToolCall]:
    found = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):
                arguments = untrusted_json.loads(arguments)
        found.append(ToolCall(name=str(function.get("name", "?")), arguments=arguments))
    return found


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


def read_fields(content: str | None) -> Any:
    """The content parsed for a sentence: JSON, text, or the complete top-level fields of an
    object whose text was cut (the list reads excerpts of long contents)."""
    parsed = parse_message(content)
    if isinstance(parsed, str) and parsed.lstrip().startswith("{"):
        fields = prefix_fields(parsed)
        return fields or parsed
    return parsed


_DECODER = json.JSONDecoder()


def prefix_fields(text: str) -> dict[str, Any]:
    """Every top-level field of a JSON object text that is complete before the text ends."""
    fields: dict[str, Any] = {}
    at, end = text.find("{") + 1, len(text)

    def skip(i: int) -> int:
        while i < end and text[i] in " \t\r\n":
            i += 1
        return i

    while True:
        at = skip(at)
        if at >= end or text[at] != '"':
            return fields
        try:
            key, at = _DECODER.raw_decode(text, at)
            at = skip(at)
            if at >= end or text[at] != ":":
                return fields
            value, at = _DECODER.raw_decode(text, skip(at + 1))
        except (ValueError, RecursionError):
            return fields
        if untrusted_json.too_deep(value):
            return fields
        fields[key] = value
        at = skip(at)
        if at >= end or text[at] != ",":
            return fields
        at += 1


def reply_sentence(reply: Reply, parameter: str | None) -> str:
    """``Model proposed hidden_size = 272``, or what the model did instead."""
    if len(reply.tool_calls) == 1:
        call = reply.tool_calls[0]
        arguments = call.arguments
        proposed = values_text(parameter, arguments) if parameter else None
        if proposed and isinstance(arguments, dict):
            return f"Model proposed {proposed}"
        if isinstance(arguments, dict) and arguments:
            return f"Model called {call.name}: {values_text(None, arguments)}"
        return f"Model called {call.name} {compact(arguments)}"
    if reply.tool_calls:
        names = ", ".join(c.name for c in reply.tool_calls)
        return f"Model made {len(reply.tool_calls)} tool calls: {names}"
    if reply.finish_reason == "length":
        return "Model reply cut at max_tokens, without a tool call"
    said = " ".join((reply.message or "").split())
    return "Model answered without a tool call" + (f": {said}" if said else "")


def summary(
    name: str,
    content: str | None,
    limit: int = 160,
    parameter: str | None = None,
    source_name: str | None = None,
) -> str:
    """The event in one line for the list: a sentence when its content tells enough, else the
    content itself."""
    if content is None:
        return ""
    if name == "reply_received":
        reply = read_reply(parse_message(content))
        if reply is not None:
            return _cut(reply_sentence(reply, parameter), limit)
    if name == "prompt_sent":
        return _cut(prompt_sent(content, parameter, source_name), limit)
    said = sentence(name, read_fields(content), parameter)
    if said:
        return _cut(said, limit)
    return _cut(" ".join(content.split()), limit)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


RUN_KEYS = (
    "run_id",
    "candidate_run_id",
    "golden_run_id",
    "latest_run_id",
    "current_golden_run_id",
)
# Lists of runs: a confirmation's runs per seed (promotion_confirmation_decided, a golden).
RUN_LIST_KEYS = ("candidate_runs", "golden_runs", "confirmation_runs")


def _run_id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 36


def run_links(content: Any) -> list[tuple[str, str]]:
    """``(key, run_id)`` for each run reference in an object content (for links)."""
    if not isinstance(content, dict):
        return []
    single = [(key, content[key]) for key in RUN_KEYS if _run_id(content.get(key))]
    listed = [
        (key, value)
        for key in RUN_LIST_KEYS
        if isinstance(runs := content.get(key), list)
        for value in runs
        if _run_id(value)
    ]
    return single + listed
