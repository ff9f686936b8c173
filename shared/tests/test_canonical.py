import copy

from hypothesis import given
from hypothesis import strategies as st

from ax3l.shared.canonical import canonical_columns, configs_equal, fingerprint, number_text
from ax3l.shared.config_schema import load_schema

SCHEMA = load_schema()
DEFAULT = SCHEMA.default_config()

numbers = st.one_of(
    st.integers(min_value=-(2**62), max_value=2**62),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)


def _rewrite(value):
    """Another representation of the same number (int <-> integral float, reparsed text)."""
    if isinstance(value, int) and abs(value) < 2**53:
        return float(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, float):
        return float(f"{value:.17e}")
    return value


def test_examples_of_equivalent_representations():
    """1970 == 1970.0, 0.003 == 3e-3 and 0.1 == 0.10 give equal configs and fingerprints."""
    a = SCHEMA.with_values(DEFAULT, {"seed": 1970, "training.learning_rate": 0.003})
    b = SCHEMA.with_values(DEFAULT, {"seed": 1970.0, "training.learning_rate": 3e-3})
    assert configs_equal(SCHEMA, a, b) and fingerprint(SCHEMA, a) == fingerprint(SCHEMA, b)
    c = SCHEMA.with_values(DEFAULT, {"model.dropout": float("0.10")})
    assert configs_equal(SCHEMA, c, DEFAULT)


def test_key_order_and_flat_form_do_not_matter():
    """A config with reversed key order, or its flat columns, is the same config."""
    reordered = {k: DEFAULT[k] for k in reversed(list(DEFAULT))}
    reordered["game"] = {k: DEFAULT["game"][k] for k in reversed(list(DEFAULT["game"]))}
    assert fingerprint(SCHEMA, reordered) == fingerprint(SCHEMA, DEFAULT)
    assert fingerprint(SCHEMA, SCHEMA.flatten(DEFAULT)) == fingerprint(SCHEMA, DEFAULT)


@given(column=st.sampled_from(SCHEMA.columns), value=numbers)
def test_equivalent_numbers_are_equal(column, value):
    """Any number and another spelling of it compare equal and share a fingerprint."""
    flat = SCHEMA.flatten(DEFAULT)
    a = dict(flat, **{column: value})
    b = dict(flat, **{column: _rewrite(value)})
    assert configs_equal(SCHEMA, a, b)
    assert fingerprint(SCHEMA, a) == fingerprint(SCHEMA, b)


@given(column=st.sampled_from(SCHEMA.columns), value=numbers)
def test_any_changed_value_makes_a_different_config(column, value):
    """Changing any one of the 26 columns (seed included) changes equality and fingerprint."""
    flat = SCHEMA.flatten(DEFAULT)
    changed = dict(flat, **{column: value})
    same = canonical_columns(SCHEMA, changed) == canonical_columns(SCHEMA, flat)
    assert configs_equal(SCHEMA, changed, flat) is same
    assert (fingerprint(SCHEMA, changed) == fingerprint(SCHEMA, flat)) is same
    if number_text(value) != number_text(flat[column]):
        assert not same


@given(a=numbers, b=numbers)
def test_number_text_is_equal_iff_numbers_are_equal(a, b):
    """The canonical text of two numbers matches exactly when their decimal values do."""
    assert (number_text(a) == number_text(b)) == (number_text(_rewrite(a)) == number_text(b))


def test_seed_matters():
    """Two configs that differ only in seed are different runs."""
    other = copy.deepcopy(DEFAULT)
    other["seed"] = 1971
    assert not configs_equal(SCHEMA, DEFAULT, other)
