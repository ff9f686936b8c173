"""How many tokens a conversation's opening prompts may take, and how many they do take.

The model server's context holds the whole request: the chat template around each message, the
tool definition, the opening prompts, the corrections that may follow within the conversation,
and the reply (capped at ``max_tokens``). The opening prompts get what is left.

There is no tokenizer here, so prompt sizes are estimated on the safe side: the estimate is
meant to be above what a llama.cpp tokenizer counts for this project's prompts (English text,
JSON, run ids, numbers), never below. Digits count one token each (several tokenizers split
numbers into digits), letters one per four, every other character one per byte.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import httpx

from ax3l.shared import untrusted_json

# Used when neither the setting nor the server's /props says how large the context is.
DEFAULT_CONTEXT_TOKENS = 16_384
# The chat template's own tokens: role markers around each message, the tool block's frame,
# the generation prompt (and an empty thinking block some templates add).
TEMPLATE_TOKENS = 256
MESSAGE_TOKENS = 8
# One correction round within the conversation: the model's tool call sent back, the tool's
# result (the reason and the correction prompt) and the correction prompt itself.
CORRECTION_TOKENS = 512
# Below this the opening prompts cannot say anything useful; the history is then summarised
# to its smallest form and the server decides.
MIN_PROMPT_TOKENS = 512

# Runs of letters or spaces are cheap; digits and everything else are not.
_PIECES = re.compile(r"[A-Za-z]+|[0-9]|\s+|[^A-Za-z0-9\s]")
# No piece costs less than one token per this many characters: a text longer than this many
# characters per budget token cannot fit, without estimating it piece by piece.
_MAX_CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A conservative token count of ``text`` (at least ``len(text) / 4``)."""
    tokens = 0
    for match in _PIECES.finditer(text):
        piece = match.group()
        first = piece[0]
        if first.isascii() and (first.isalpha() or first.isspace()):
            tokens += -(-len(piece) // _MAX_CHARS_PER_TOKEN)
        elif first.isascii():
            tokens += 1
        else:
            tokens += len(piece.encode("utf-8"))
    return tokens


def fits(text: str, budget_tokens: int) -> bool:
    """Whether the estimate of ``text`` is within ``budget_tokens`` (long texts fail fast)."""
    if len(text) > budget_tokens * _MAX_CHARS_PER_TOKEN:
        return False
    return estimate_tokens(text) <= budget_tokens


def messages_tokens(texts: list[str]) -> int:
    """The estimate for these message texts, with each message's template tokens."""
    return sum(estimate_tokens(text) + MESSAGE_TOKENS for text in texts)


def prompt_token_budget(
    context_tokens: int,
    max_tokens: int,
    tool_definition: Mapping[str, Any] | None = None,
    corrections: int = 0,
) -> int:
    """Tokens the opening prompts may take (messages and their template tokens included).

    ``context_tokens`` is the server's context per request (per slot), ``max_tokens`` the cap
    on the reply, ``tool_definition`` the tool as sent in the request's ``tools`` list, and
    ``corrections`` how many correction rounds the conversation may still add.
    """
    tool = estimate_tokens(json.dumps(tool_definition)) if tool_definition is not None else 0
    left = context_tokens - max_tokens - TEMPLATE_TOKENS - tool - corrections * CORRECTION_TOKENS
    return max(left, MIN_PROMPT_TOKENS)


def shrunk_budget(budget_tokens: int, shrink: int) -> int:
    """The budget after ``shrink`` context overflows: halved per level."""
    if shrink < 0:
        raise ValueError(f"shrink must be 0 or more, not {shrink}")
    return budget_tokens >> shrink if shrink < 64 else 0


async def model_context_tokens(
    base_url: str, request_timeout: float, client: httpx.AsyncClient | None = None
) -> int | None:
    """The context size per request that llama-server reports at ``GET {base_url}/props``.

    That is ``default_generation_settings.n_ctx`` (the slot's context, already divided among
    parallel slots); a top-level ``n_ctx`` is accepted from servers that put it there. None when
    the server does not answer, answers with an error, or reports no positive integer.
    """
    url = base_url.rstrip("/") + "/props"
    try:
        if client is None:
            async with httpx.AsyncClient(timeout=httpx.Timeout(request_timeout)) as own:
                response = await own.get(url)
        else:
            response = await client.get(url, timeout=httpx.Timeout(request_timeout))
        if response.status_code != 200:
            return None
        props = untrusted_json.loads(response.content)
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    if n_ctx is None:
        n_ctx = props.get("n_ctx")
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int | float):
        return None
    if not math.isfinite(n_ctx) or n_ctx <= 0 or n_ctx != int(n_ctx):
        return None
    return int(n_ctx)


async def context_tokens(
    configured: int | None,
    base_url: str | None,
    request_timeout: float,
    client: httpx.AsyncClient | None = None,
) -> int:
    """The context to plan for: the setting, else the server's /props, else 16,384."""
    if configured is not None:
        return configured
    if base_url:
        reported = await model_context_tokens(base_url, request_timeout, client)
        if reported is not None:
            return reported
    return DEFAULT_CONTEXT_TOKENS


_OVERFLOW_MARKERS = (
    "exceed_context_size_error",
    "exceeds the available context size",
    "context length",
    "context size",
)


def is_context_overflow(http_status: int | None, detail: str) -> bool:
    """Whether a failed request was refused for not fitting the context (llama-server: HTTP 400
    with ``exceed_context_size_error``)."""
    if http_status != 400:
        return False
    text = detail.casefold()
    return any(marker in text for marker in _OVERFLOW_MARKERS)
