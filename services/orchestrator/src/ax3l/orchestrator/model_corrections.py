"""Correction prompts for the model's own mistakes, sent in the same conversation.

The broker's rejections come with their own prompts (InvalidValue, NoDupes); these are the
orchestrator's for replies that never reached the broker: prose, a wrong tool, wrong arguments,
a reply cut at the token cap. Each names what went wrong and repeats what a valid answer is.
The model's own text is quoted back only as JSON (escaped, bounded), never as instructions.
"""

from __future__ import annotations

import json
from typing import Any

from ax3l.orchestrator.llm_client import ModelFailure
from ax3l.orchestrator.mcp_session import ToolDefinition
from ax3l.orchestrator.prompts import Prompt

QUOTE_LIMIT = 300

SOURCE_NAMES = {
    "no_tool_call": "NoToolCall",
    "wrong_tool": "WrongTool",
    "wrong_arguments": "WrongArguments",
    "length": "ReplyTooLong",
}


def _expected_call(tool: ToolDefinition) -> str:
    example = {name: "<number>" for name in tool.argument_names}
    return f"one call of `{tool.name}` with the arguments {json.dumps(example)}"


def correction_for(failure: ModelFailure, tool: ToolDefinition) -> Prompt:
    """The correction prompt for a correctable model failure."""
    expected = _expected_call(tool)
    if failure.kind == "no_tool_call":
        text = (
            "Your reply contained no tool call, so nothing was submitted. Do not answer in prose:"
            f" reply with {expected}, each value a JSON number."
        )
    elif failure.kind == "wrong_tool":
        text = (
            f"Your tool call was not accepted: {_quoted(failure.detail)}. The only tool of this"
            f" conversation is `{tool.name}`; reply with {expected}."
        )
    elif failure.kind == "wrong_arguments":
        text = (
            f"Your tool call had invalid arguments: {_quoted(failure.detail)}. Reply with"
            f" {expected}; every value must be a plain JSON number (no quotes, units or"
            " expressions)."
        )
    elif failure.kind == "length":
        text = (
            "Your reply was too long and was cut off before it finished, so nothing was"
            f" submitted. Think briefly, then reply with {expected}."
        )
    else:
        raise ValueError(f"{failure.kind} is not a correctable model failure")
    return Prompt(SOURCE_NAMES[failure.kind], text)


def prose_of(reply: Any) -> str:
    """The assistant's visible text in ``reply`` (never its reasoning), for the conversation."""
    try:
        message = reply["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return ""
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def _quoted(detail: str) -> str:
    return json.dumps(detail[:QUOTE_LIMIT])
