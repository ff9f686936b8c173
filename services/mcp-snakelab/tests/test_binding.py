import pytest

from ax3l.app.snakelab.tools.binding import binding_from_env


@pytest.mark.parametrize("raw", ["", "   "])
def test_no_assignment_refuses_both_kinds(raw):
    """An unset or blank assignment refuses single and pair submissions."""
    binding = binding_from_env({"AX3L_CONVERSATION_PARAMETER": raw})
    assert binding.entry is None
    assert "no assigned parameter" in (binding.refusal("single") or "")
    assert "no assigned parameter" in (binding.refusal("pair") or "")


def test_unknown_assignment_is_named_in_the_refusal():
    """A name outside the round robin refuses submissions and lists the known names."""
    binding = binding_from_env({"AX3L_CONVERSATION_PARAMETER": "seed"})
    refusal = binding.refusal("single") or ""
    assert "'seed'" in refusal and "reward_pair" in refusal


def test_single_and_pair_assignments_refuse_the_other_tool():
    """A single assignment refuses pairs and a pair assignment refuses singles."""
    single = binding_from_env({"AX3L_CONVERSATION_PARAMETER": "gamma"})
    pair = binding_from_env({"AX3L_CONVERSATION_PARAMETER": "epsilon_pair"})
    assert single.refusal("single") is None and pair.refusal("pair") is None
    assert "submit_single_value(value)" in (single.refusal("pair") or "")
    assert "submit_pair_values(value_1, value_2)" in (pair.refusal("single") or "")
