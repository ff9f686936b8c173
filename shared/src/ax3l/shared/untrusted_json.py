"""JSON that comes from outside Ax3l (a model server's reply and its tool call's arguments, a
tool-channel peer's request, and the contents stored from them), parsed so that no text can
crash its reader.

``json.loads`` raises ``RecursionError``, which is no ``ValueError``, at about a thousand levels
of nesting, and a value a few hundred levels deep still breaks recursive code after it (an
indented ``json.dumps``, a template). A lone surrogate (``"\\ud800"``) parses, but no utf8mb4
column can store it. ``loads`` turns all of these into ``UnsafeJSON``, a ``ValueError``, so a
reader's ``except ValueError`` holds for them too.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Deeper than this no JSON Ax3l reads is (a reply is about 5 levels, an event's content 4).
MAX_DEPTH = 64
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


class UnsafeJSON(ValueError):
    """JSON no reader should take: nested too deep, or text a database cannot store."""


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``text`` parsed; ``ValueError`` when it is not JSON (bytes: not UTF-8 either), and
    ``UnsafeJSON`` when it is nested deeper than ``max_depth`` or holds a lone surrogate."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")  # UnicodeDecodeError is a ValueError
    try:
        value = json.loads(text)
    except RecursionError:
        raise UnsafeJSON(f"nested deeper than {max_depth} levels") from None
    if too_deep(value, max_depth):
        raise UnsafeJSON(f"nested deeper than {max_depth} levels")
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise UnsafeJSON("a lone surrogate (\\ud800-\\udfff) no database can store") from None
    return value


def too_deep(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether ``value`` (parsed JSON) nests lists and objects more than ``max_depth`` deep;
    counted without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level > max_depth:
            return True
        stack.extend((child, level + 1) for child in children)
    return False
