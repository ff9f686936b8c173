"""The grammar of a proposal's reply (``AX3L_LLM_GRAMMAR``): GBNF that llama-server enforces.

The reply is the tool's arguments as one JSON object, written one way only: ``{"value": N}`` for
a single, ``{"value_1": A, "value_2": B}`` for a pair (the tool's own argument names). A number
the grammar admits is legal and open:

* a finite entry (every leaf has a domain, ``registry.leaf_domain``): exactly its open choices
  (``open_values.OpenValues``), a pair's as one branch per first value;
* a continuous leaf: every decimal from its minimum to its maximum inclusive with at most
  ``decimals`` fraction digits (the built-in proposers' rounding, ``search_space.Dimension``),
  in its shortest form (no exponent, no leading zeros, no trailing fraction zeros, no ``-0``),
  except the values ``excluded`` (already run on the current seed with every other setting as
  in the golden, and the golden's own); a pair excludes the tested pairs, not each value alone.

A reasoning model may reason first: the grammar admits a reasoning part ending in
``REASONING_END`` (``</think>``, as the chat templates of Qwen3, Qwen3.5 and DeepSeek close it)
before the answer, with at most ``SPACE_AFTER_REASONING`` whitespace characters between them.
llama-server forces that end tag at once under ``--reasoning-budget 0`` (``make llm-start``), and
a grammar that refused it fails the request; a model that does not reason starts with the
answer. Only the answer is constrained.

A continuous range becomes alternatives of digit classes, one per run of numbers with a common
prefix (the usual construction of a numeric range as a regular expression), so the grammar
stays a few dozen alternatives for any range. No library builds GBNF (or a regular expression)
for a decimal range with exclusions; the construction is small and ``test_reply_grammar``
checks it against the schema's rules number by number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ax3l.orchestrator.open_values import OpenValues
from ax3l.orchestrator.proposers.search_space import Dimension, Key, dimensions, key_of
from ax3l.shared.canonical import canonical_number
from ax3l.shared.config_schema import ConfigSchema

# A digit position: the digits low..high. A pattern is a sequence of positions and literal text
# (the sign, the decimal point).
Digits = tuple[int, int]
Pattern = tuple[Digits | str, ...]

# What a number without bounds may be (JSON's number without exponent): the broker decides.
ANY_NUMBER = '"-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)?'
REASONING_END = "</think>"
SPACE_AFTER_REASONING = 3


@dataclass(frozen=True)
class Grammar:
    """A reply grammar: its GBNF text and the argument names it writes."""

    text: str
    names: tuple[str, ...]


def _fixed_width(low: str, high: str) -> list[Pattern]:
    """Patterns for every digit string of ``len(low)`` digits from ``low`` to ``high``."""
    if not low:
        return [()]
    if low == high:
        return [tuple((int(d), int(d)) for d in low)]
    first_low, first_high = int(low[0]), int(high[0])
    rest = len(low) - 1
    if first_low == first_high:
        return [((first_low, first_low), *p) for p in _fixed_width(low[1:], high[1:])]
    found: list[Pattern] = []
    start, end = first_low, first_high
    if low[1:] != "0" * rest:
        found += [((first_low, first_low), *p) for p in _fixed_width(low[1:], "9" * rest)]
        start += 1
    tail: list[Pattern] = []
    if high[1:] != "9" * rest:
        tail = [((first_high, first_high), *p) for p in _fixed_width("0" * rest, high[1:])]
        end -= 1
    if start <= end:
        found.append(((start, end), *([(0, 9)] * rest)))
    return found + tail


def _padded(low: int, high: int, width: int) -> list[Pattern]:
    """Patterns for the integers ``low..high`` (>= 0) written with at least ``width`` digits:
    zero-padded to ``width``, longer ones without leading zeros."""
    found: list[Pattern] = []
    for length in range(width, max(width, len(str(high))) + 1):
        first = max(low, 10 ** (length - 1) if length > width else 0)
        last = min(high, 10**length - 1)
        if first <= last:
            found += _fixed_width(str(first).zfill(length), str(last).zfill(length))
    return found


def _scaled_patterns(low: int, high: int, decimals: int) -> list[Pattern]:
    """Patterns for ``k / 10**decimals``, ``k`` in ``low..high`` (>= 0), in shortest form:
    with ``decimals`` fraction digits the last one is not 0."""
    if low > high:
        return []
    if decimals == 0:
        return _padded(low, high, 1)
    found: list[Pattern] = []
    # k = 10 m + r with r in 1..9: the runs of m whose last digits r share their bounds.
    m_low, m_high = low // 10, high // 10
    runs: list[tuple[int, int, int, int]] = []
    if m_low == m_high:
        runs.append((m_low, m_low, max(low % 10, 1), high % 10))
    else:
        runs.append((m_low, m_low, max(low % 10, 1), 9))
        if m_low + 1 <= m_high - 1:
            runs.append((m_low + 1, m_high - 1, 1, 9))
        runs.append((m_high, m_high, 1, high % 10))
    for first, last, r_low, r_high in runs:
        if r_low > r_high:
            continue
        for pattern in _padded(first, last, decimals):
            point = len(pattern) - (decimals - 1)
            found.append((*pattern[:point], ".", *pattern[point:], (r_low, r_high)))
    return found


def _fraction_digits(value: Fraction) -> int | None:
    """The fraction digits of ``value``'s shortest decimal form; None when it has none."""
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    return None if denominator != 1 else max(twos, fives)


def _without(low: int, high: int, holes: Iterable[int]) -> list[tuple[int, int]]:
    """``low..high`` minus ``holes``, as runs."""
    runs, start = [], low
    for hole in sorted(h for h in set(holes) if low <= h <= high):
        if start <= hole - 1:
            runs.append((start, hole - 1))
        start = hole + 1
    if start <= high:
        runs.append((start, high))
    return runs


def decimal_patterns(
    minimum: Fraction, maximum: Fraction, decimals: int, excluded: Iterable[Fraction] = ()
) -> list[Pattern]:
    """Patterns for every number from ``minimum`` to ``maximum`` with at most ``decimals``
    fraction digits, in shortest form, except ``excluded``."""
    excluded = set(excluded)
    found: list[Pattern] = []
    for digits in range(decimals + 1):
        scale = 10**digits
        low, high = math.ceil(minimum * scale), math.floor(maximum * scale)
        holes = [int(v * scale) for v in excluded if _fraction_digits(v) == digits]
        for first, last in _without(low, high, holes):
            if last >= 0:  # zero and the positive numbers
                found += _scaled_patterns(max(first, 0), last, digits)
            if first < 0:  # the negative ones: a sign before the absolute value, never "-0"
                magnitude = _scaled_patterns(max(1, -min(last, -1)), -first, digits)
                found += [("-", *p) for p in magnitude]
    return found


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _gbnf_pattern(pattern: Pattern) -> str:
    """One pattern as a GBNF sequence: runs of fixed characters as one literal."""
    parts: list[str] = []
    fixed = ""
    for position in pattern:
        if isinstance(position, str):
            fixed += position
            continue
        low, high = position
        if low == high:
            fixed += str(low)
            continue
        if fixed:
            parts.append(_literal(fixed))
            fixed = ""
        parts.append(f"[{low}-{high}]")
    if fixed:
        parts.append(_literal(fixed))
    return " ".join(parts)


def _alternatives(patterns: Sequence[Pattern]) -> str:
    return " | ".join(_gbnf_pattern(p) for p in patterns)


def number_text(value: int | float) -> str:
    """A value as the reply writes it (JSON; a float's shortest repr)."""
    return repr(value) if isinstance(value, float) else str(value)


def _bounds(dim: Dimension) -> tuple[Fraction, Fraction] | None:
    leaf = dim.leaf
    if leaf.minimum is None or leaf.maximum is None:
        return None
    return canonical_number(leaf.minimum), canonical_number(leaf.maximum)


def _writes(dim: Dimension, value: Fraction) -> bool:
    """Whether the grammar of ``dim`` (without exclusions) writes ``value``."""
    bounds = _bounds(dim)
    digits = _fraction_digits(value)
    if bounds is None or digits is None:
        return False
    return bounds[0] <= value <= bounds[1] and digits <= dim.decimals


def _continuous_rule(dim: Dimension, excluded: Iterable[Fraction]) -> str:
    bounds = _bounds(dim)
    if bounds is None:
        return ANY_NUMBER
    patterns = decimal_patterns(bounds[0], bounds[1], dim.decimals, excluded)
    return _alternatives(patterns) if patterns else '"no-legal-value"'


def _not_char(char: str) -> str:
    """A GBNF class of every character but ``char``."""
    escaped = char
    for special in ("\\", "]", "^", "-"):
        escaped = escaped.replace(special, "\\" + special)
    return "[^" + escaped + "]"


def text_without(tag: str) -> str:
    """GBNF for text that does not contain ``tag``: pieces of a proper prefix of the tag and one
    character that does not continue it. (A tag's first character right before the tag, as in
    ``<</think>``, reads as text: the reasoning then goes on to the next end tag.)"""
    options = [(f"{_literal(tag[:i])} " if i else "") + _not_char(tag[i]) for i in range(len(tag))]
    return "(" + " | ".join(options) + ")*"


def _object(names: Sequence[str], values: Sequence[str]) -> str:
    """The JSON object ``{"name": value, ...}`` as a GBNF sequence (values are rule names or
    literals)."""
    parts = []
    for i, (name, value) in enumerate(zip(names, values, strict=True)):
        prefix = "{" if i == 0 else ", "
        parts += [_literal(f'{prefix}"{name}": '), value]
    return " ".join([*parts, _literal("}")])


def reply_grammar(
    schema: ConfigSchema,
    values: OpenValues,
    names: Sequence[str],
    excluded: Iterable[Key] = (),
) -> Grammar:
    """The grammar of a reply for ``values``' entry, its arguments called ``names`` (the tool's
    argument order): an optional reasoning part, then the answer. ``excluded``: the keys the
    answer may not take (tested on this seed, the golden's), beside those ``values`` leaves
    out."""
    answer = answer_grammar(schema, values, names, excluded)
    reasoning = (
        f"root ::= (reasoning {_literal(REASONING_END)} [ \\t\\n]{{0,{SPACE_AFTER_REASONING}}})?"
        f" answer\nreasoning ::= {text_without(REASONING_END)}\n"
    )
    return Grammar(reasoning + answer.text.replace("root ::=", "answer ::=", 1), answer.names)


def answer_grammar(
    schema: ConfigSchema,
    values: OpenValues,
    names: Sequence[str],
    excluded: Iterable[Key] = (),
) -> Grammar:
    """The grammar of the answer alone (its root rule ``root``): the arguments object."""
    names = tuple(names)
    if len(names) != len(values.leaves):
        raise ValueError(f"{len(names)} argument names for {len(values.leaves)} values")
    excluded = set(excluded)
    if values.choices is not None:
        open_choices = [c for c in values.choices if key_of(c) not in excluded]
        return Grammar(_finite(names, open_choices), names)
    dims = dimensions(schema, values.entry)
    rules = []
    if len(dims) == 1:
        singles = [key[0] for key in excluded if len(key) == 1]
        rules.append(f"value-1 ::= {_continuous_rule(dims[0], singles)}")
        root = _object(names, ["value-1"])
    else:
        first, second = dims
        taken: dict[Fraction, list[Fraction]] = {}
        for key in excluded:
            if len(key) == 2:
                taken.setdefault(key[0], []).append(key[1])
        # value_1 free of any first value that has a tested partner; each such first value
        # its own branch, without its tested partners.
        rules.append(f"value-1 ::= {_continuous_rule(first, set(taken))}")
        rules.append(f"value-2 ::= {_continuous_rule(second, ())}")
        branches = [_object(names, ["value-1", "value-2"])]
        for i, (a, bs) in enumerate(sorted(taken.items())):
            if not _writes(first, a):
                continue  # value_1's grammar never writes it
            rules.append(f"value-2-after-{i} ::= {_continuous_rule(second, bs)}")
            branches.append(_object(names, [_literal(_decimal_text(a)), f"value-2-after-{i}"]))
        root = " | ".join(f"({b})" for b in branches)
    return Grammar("\n".join([f"root ::= {root}", *rules]) + "\n", names)


def _decimal_text(value: Fraction) -> str:
    """A value with a finite decimal form, written shortest (as the grammar writes it)."""
    digits = _fraction_digits(value) or 0
    scaled = abs(value) * 10**digits
    whole, fraction = divmod(int(scaled), 10**digits)
    sign = "-" if value < 0 else ""
    if digits == 0:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{str(fraction).zfill(digits)}"


def _finite(names: tuple[str, ...], choices: Sequence[tuple[int | float, ...]]) -> str:
    if not choices:
        return 'root ::= "no-open-value"\n'
    if len(names) == 1:
        listed = " | ".join(_literal(number_text(c[0])) for c in choices)
        return f"root ::= {_object(names, ['value-1'])}\nvalue-1 ::= {listed}\n"
    by_first: dict[int | float, list[int | float]] = {}
    for a, b in choices:
        by_first.setdefault(a, []).append(b)
    branches, rules = [], []
    for i, (a, bs) in enumerate(by_first.items()):
        rules.append(f"value-2-after-{i} ::= " + " | ".join(_literal(number_text(b)) for b in bs))
        branches.append(_object(names, [_literal(number_text(a)), f"value-2-after-{i}"]))
    root = " | ".join(f"({b})" for b in branches)
    return "\n".join([f"root ::= {root}", *rules]) + "\n"
