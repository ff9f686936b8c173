"""A reader of the GBNF subset that ``ax3l.orchestrator.reply_grammar`` writes, for tests: a
grammar's language as a Python regular expression, a random string of it, or all of them.

The subset: ``name ::= expression`` rules (the first is ``root`` and rules do not recurse),
expressions of alternatives (``|``), sequences, groups (``(...)``), double-quoted literals with
``\\"`` and ``\\\\`` escapes, character classes (``[0-9]``) and the postfix ``?``, ``*``, ``+`` and
``{m,n}``.
Written independently of the grammar's builder so that a test checks one against the other.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

# A parsed expression: ("alt", [...]), ("seq", [...]), ("lit", text), ("class", regex),
# ("ref", name), ("rep", node, op).
Node = tuple[Any, ...]


@dataclass(frozen=True)
class GrammarReader:
    rules: dict[str, Node]

    @classmethod
    def parse(cls, text: str) -> GrammarReader:
        rules: dict[str, Node] = {}
        for line in text.strip().splitlines():
            name, _, expression = line.partition("::=")
            tokens = _tokens(expression.strip())
            node, rest = _alternatives(tokens)
            if rest:
                raise ValueError(f"unparsed {rest!r} in {line!r}")
            rules[name.strip()] = node
        if "root" not in rules:
            raise ValueError("no root rule")
        return cls(rules)

    def regex(self, rule: str = "root") -> re.Pattern[str]:
        return re.compile(self._regex(self.rules[rule]), re.DOTALL)

    def _regex(self, node: Node) -> str:
        kind = node[0]
        if kind == "alt":
            return "(?:" + "|".join(self._regex(n) for n in node[1]) + ")"
        if kind == "seq":
            return "".join(self._regex(n) for n in node[1])
        if kind == "lit":
            return re.escape(str(node[1]))
        if kind == "class":
            return str(node[1])
        if kind == "ref":
            return "(?:" + self._regex(self.rules[str(node[1])]) + ")"
        return "(?:" + self._regex(node[1]) + ")" + str(node[2])

    def sample(self, rng: random.Random, rule: str = "root") -> str:
        """A random string of the language (each alternative equally likely)."""
        return self._sample(self.rules[rule], rng)

    def _sample(self, node: Node, rng: random.Random) -> str:
        kind = node[0]
        if kind == "alt":
            return self._sample(rng.choice(node[1]), rng)
        if kind == "seq":
            return "".join(self._sample(n, rng) for n in node[1])
        if kind == "lit":
            return str(node[1])
        if kind == "class":
            return rng.choice(_class_members(str(node[1])))
        if kind == "ref":
            return self._sample(self.rules[str(node[1])], rng)
        low, high = _bounds(str(node[2]))
        return "".join(self._sample(node[1], rng) for _ in range(rng.randint(low, high)))

    def language(self, rule: str = "root") -> set[str]:
        """Every string of a language without repetition."""
        return self._language(self.rules[rule])

    def _language(self, node: Node) -> set[str]:
        kind = node[0]
        if kind == "alt":
            return set().union(*(self._language(n) for n in node[1]))
        if kind == "seq":
            found = {""}
            for part in node[1]:
                found = {a + b for a in found for b in self._language(part)}
            return found
        if kind == "lit":
            return {str(node[1])}
        if kind == "class":
            return set(_class_members(str(node[1])))
        if kind == "ref":
            return self._language(self.rules[str(node[1])])
        raise ValueError("a repeated part has no finite language")


_TOKEN = re.compile(
    r'\s*("(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|\{\d+,\d+\}|[()|?*+]|[A-Za-z0-9-]+)'
)


def _tokens(text: str) -> list[str]:
    found, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if not match:
            if text[at:].strip():
                raise ValueError(f"cannot read {text[at:]!r}")
            break
        found.append(match.group(1))
        at = match.end()
    return found


def _alternatives(tokens: list[str]) -> tuple[Node, list[str]]:
    options = []
    node, tokens = _sequence(tokens)
    options.append(node)
    while tokens and tokens[0] == "|":
        node, tokens = _sequence(tokens[1:])
        options.append(node)
    return (("alt", options) if len(options) > 1 else options[0]), tokens


def _sequence(tokens: list[str]) -> tuple[Node, list[str]]:
    parts: list[Node] = []
    while tokens and tokens[0] not in ("|", ")"):
        token, tokens = tokens[0], tokens[1:]
        if token == "(":
            node, tokens = _alternatives(tokens)
            if not tokens or tokens[0] != ")":
                raise ValueError("unclosed group")
            tokens = tokens[1:]
        elif token.startswith('"'):
            node = ("lit", re.sub(r"\\(.)", r"\1", token[1:-1]))
        elif token.startswith("["):
            node = ("class", token)
        else:
            node = ("ref", token)
        while tokens and (tokens[0] in ("?", "*", "+") or tokens[0].startswith("{")):
            node = ("rep", node, tokens[0])
            tokens = tokens[1:]
        parts.append(node)
    return ("seq", parts), tokens


def _bounds(operator: str) -> tuple[int, int]:
    """How often a repeated part occurs when sampled (``*`` and ``+``: at most 3 times)."""
    if operator.startswith("{"):
        low, high = operator[1:-1].split(",")
        return int(low), int(high)
    return {"?": (0, 1), "*": (0, 3), "+": (1, 3)}[operator]


def _class_members(pattern: str) -> list[str]:
    compiled = re.compile(pattern)
    return [chr(c) for c in range(32, 127) if compiled.fullmatch(chr(c))]
