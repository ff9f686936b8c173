import ax3l.shared.prompts_corrections as prompts_corrections


def test_invalid_value_prompt_carries_the_reason_and_asks_again():
    """InvalidValue(reason) quotes the reason once, as a sentence, and asks for a legal value."""
    text = prompts_corrections.invalid_value("$.model.hidden_size: 65 is not a multiple of 16")
    assert "$.model.hidden_size: 65 is not a multiple of 16." in text
    assert "call the tool once more" in text
    assert prompts_corrections.INVALID_VALUE == "InvalidValue"


def test_no_dupes_prompt_carries_the_reason_and_asks_for_an_untested_value():
    """NoDupes(reason) says the configuration already ran and asks for an untested value."""
    text = prompts_corrections.no_dupes("run abc already used gamma = 0.97.")
    assert "run abc already used gamma = 0.97." in text and ".." not in text
    assert "not been tested" in text
    assert prompts_corrections.NO_DUPES == "NoDupes"
