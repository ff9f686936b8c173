"""The reply grammar (AX3L_LLM_GRAMMAR) admits exactly the legal, open values: for a finite entry
its open choices, for a continuous one every number the schema's rules allow at the proposers'
precision, in one written form, except the tested values. Checked against the schema's rules
with an independent reader of the grammar (``ax3l.testing.gbnf``)."""

from __future__ import annotations

import json
import random
import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ax3l.orchestrator.open_values import open_values
from ax3l.orchestrator.proposers.search_space import Dimension, dimensions, key_of
from ax3l.orchestrator.reply_grammar import decimal_patterns, reply_grammar
from ax3l.shared.config_schema import load_schema
from ax3l.shared.registry import BY_NAME, ENTRIES, domain
from ax3l.testing.gbnf import GrammarReader

SCHEMA = load_schema()
CONTINUOUS = [e.name for e in ENTRIES if domain(SCHEMA, e) is None]
FINITE = [e.name for e in ENTRIES if domain(SCHEMA, e) is not None]
SHORTEST = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?")


def _legal_number(text: str, dim: Dimension) -> Fraction | None:
    """The value of ``text`` if it is a legal number of ``dim`` written shortest, else None."""
    if not SHORTEST.fullmatch(text) or text == "-0":
        return None
    value = Fraction(text)
    digits = len(text.split(".")[1]) if "." in text else 0
    leaf = dim.leaf
    low, high = Fraction(repr(leaf.minimum)), Fraction(repr(leaf.maximum))
    if not low <= value <= high or digits > dim.decimals:
        return None
    return value


def _candidates(dim: Dimension) -> st.SearchStrategy[str]:
    """Number texts in and around the leaf's range: any fraction digits up to one more than
    the precision, trailing zeros, signs, leading zeros, exponents."""
    leaf = dim.leaf
    low, high = Fraction(repr(leaf.minimum)), Fraction(repr(leaf.maximum))

    @st.composite
    def text(draw: st.DrawFn) -> str:
        digits = draw(st.integers(0, dim.decimals + 1))
        scale = 10**digits
        k = draw(st.integers(int(low * scale) - 30, int(high * scale) + 30))
        whole, part = divmod(abs(k), scale)
        body = str(whole) + (f".{str(part).zfill(digits)}" if digits else "")
        body += draw(st.sampled_from(["", "", "", "0", "00"])) if digits else ""
        form = draw(st.sampled_from(["plain"] * 6 + ["zero", "plus", "exponent"]))
        if form == "zero":
            body = "0" + body
        elif form == "plus":
            body = "+" + body
        elif form == "exponent":
            body = body + "e0"
        return ("-" if k < 0 else "") + body

    return text()


def _grammar_and_dims(
    name: str, excluded: set[tuple[Fraction, ...]]
) -> tuple[GrammarReader, tuple[Dimension, ...]]:
    entry = BY_NAME[name]
    grammar = reply_grammar(
        SCHEMA, open_values(SCHEMA, entry, excluded), entry.value_names, excluded
    )
    return GrammarReader.parse(grammar.text), dimensions(SCHEMA, entry)


def _tested(
    dims: tuple[Dimension, ...], rng: random.Random, count: int
) -> set[tuple[Fraction, ...]]:
    """``count`` random legal keys at the proposers' precision (some with fewer digits)."""
    found = set()
    for _ in range(count):
        key = []
        for dim in dims:
            digits = rng.randint(1, dim.decimals)
            value = round(rng.uniform(dim.low, dim.high), digits)
            key.append(Fraction(repr(min(dim.high, max(dim.low, value)))))
        found.add(tuple(key))
    return found


@pytest.mark.parametrize("name", [n for n in CONTINUOUS if BY_NAME[n].kind == "single"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_a_continuous_single_admits_exactly_its_legal_untested_numbers(
    name: str, data: st.DataObject
) -> None:
    """Every number text near the range is admitted iff it is legal (bounds, at most the
    proposers' fraction digits, written shortest) and not tested on this seed."""
    (dim,) = dimensions(SCHEMA, BY_NAME[name])
    rng = random.Random(data.draw(st.integers(0, 10**6)))
    tested = _tested((dim,), rng, rng.randint(0, 6))
    reader, _ = _grammar_and_dims(name, tested)
    number = reader.regex("value-1")
    for _ in range(20):
        text = data.draw(_candidates(dim))
        value = _legal_number(text, dim)
        legal = value is not None and (value,) not in tested
        assert bool(number.fullmatch(text)) == legal, text
    for key in tested:  # a tested value is never admitted, whatever its digits
        assert not number.fullmatch(str(float(key[0])))


@pytest.mark.parametrize("name", CONTINUOUS)
@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_every_reply_the_grammar_admits_is_a_legal_untested_call(name: str, seed: int) -> None:
    """Replies drawn from the grammar are one JSON object with exactly the tool's arguments,
    every value legal and the key untested (pairs: the pair, not each value)."""
    rng = random.Random(seed)
    entry = BY_NAME[name]
    dims = dimensions(SCHEMA, entry)
    tested = _tested(dims, rng, rng.randint(0, 8))
    if len(dims) == 2 and tested:  # also pairs that share a first value with another
        first = next(iter(tested))[0]
        tested |= {(first, key[1]) for key in _tested(dims, rng, 3)}
    reader, _ = _grammar_and_dims(name, tested)
    for _ in range(30):
        text = reader.sample(rng, "answer")
        arguments = json.loads(text)
        assert list(arguments) == list(entry.value_names)
        texts = re.findall(r": (-?[0-9.]+)", text)
        values = [_legal_number(t, dim) for t, dim in zip(texts, dims, strict=True)]
        assert None not in values, text
        assert tuple(values) not in tested, text


def test_a_continuous_pair_admits_a_tested_first_value_with_another_partner() -> None:
    """A tested pair excludes only that pair: its first value stays open with other partners."""
    reader, _ = _grammar_and_dims("epsilon_pair", {(Fraction("0.96"), Fraction("0.97"))})
    root = reader.regex("answer")
    assert not root.fullmatch('{"value_1": 0.96, "value_2": 0.97}')
    assert root.fullmatch('{"value_1": 0.96, "value_2": 0.98}')
    assert root.fullmatch('{"value_1": 0.95, "value_2": 0.97}')
    assert not root.fullmatch('{"value_1": 0.96, "value_2": 0.970}')  # one written form
    assert not root.fullmatch('{"value_1": 0.96,"value_2": 0.98}')  # one spacing


@pytest.mark.parametrize("name", FINITE)
def test_a_finite_entry_admits_exactly_its_open_choices(name: str) -> None:
    """The grammar's whole language is the open choices, each as one JSON object."""
    entry = BY_NAME[name]
    legal = domain(SCHEMA, entry) or []
    tested = set(random.Random(name).sample(legal, len(legal) // 3))
    values = open_values(SCHEMA, entry, tested)
    grammar = reply_grammar(SCHEMA, values, entry.value_names, tested)
    replies = GrammarReader.parse(grammar.text).language("answer")
    admitted = {key_of(tuple(json.loads(r).values())) for r in replies}
    assert admitted == set(legal) - tested
    assert len(replies) == len(admitted)  # one written form per choice
    assert all(list(json.loads(r)) == list(entry.value_names) for r in replies)


def test_ranges_cross_zero_and_whole_numbers() -> None:
    """Negative and positive numbers, whole ones without a point, never "-0"."""
    patterns = decimal_patterns(Fraction(-15, 10), Fraction(12), 1, {Fraction(1, 2)})
    from ax3l.orchestrator.reply_grammar import _alternatives

    reader = GrammarReader.parse(f"root ::= {_alternatives(patterns)}\n")
    language = reader.language()
    expected = {
        str(v) if v.denominator == 1 else f"{float(v)}"
        for k in range(-15, 121)
        if (v := Fraction(k, 10)) != Fraction(1, 2)
    }
    assert language == expected
    assert "-0" not in language and "0" in language and "-1.5" in language


def test_only_the_answer_is_constrained_after_an_optional_reasoning_part() -> None:
    """A reply may reason first, up to the end tag that llama-server forces under a reasoning
    budget, then a little whitespace; the answer is constrained either way, and nothing but
    reasoning may come before it."""
    reader, _ = _grammar_and_dims("gamma", set())
    root = reader.regex()
    answer = '{"value": 0.95}'
    for reply in (
        answer,
        "\n</think>\n\n" + answer,
        "The decay matters; 0.95 < 0.99 suits </think> " + answer,
    ):
        assert root.fullmatch(reply), reply
    for reply in (
        "I choose " + answer,  # prose without a reasoning part
        "</think>\n\n\n\n" + answer,  # unbounded whitespace would let a small model loop
        "</think>" + '{"value": 0.5}',  # out of range after reasoning too
        "</think></think>" + answer,
        answer + " ",
    ):
        assert not root.fullmatch(reply), reply


def test_an_unconstrained_grammar_still_leaves_out_the_golden() -> None:
    """With every legal choice offered (AX3L_LLM_CONSTRAINED=false) the excluded keys, the
    golden's, are still not admitted."""
    entry = BY_NAME["hidden_size"]
    golden = key_of((224,))
    grammar = reply_grammar(SCHEMA, open_values(SCHEMA, entry, set()), ("value",), {golden})
    offered = {json.loads(r)["value"] for r in GrammarReader.parse(grammar.text).language("answer")}
    assert 224 not in offered and len(offered) == len(domain(SCHEMA, entry) or []) - 1
