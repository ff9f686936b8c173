import math

import pytest
from pydantic import ValidationError

from ax3l.shared import registry
from ax3l.shared.wire import (
    ControlRequest,
    RunStatus,
    SubmitPairValuesPayload,
    SubmitSingleValuePayload,
    ToolEnvelope,
    number_problem,
    payload_fields,
    payload_for,
)

ENVELOPE = {
    "protocol_version": 1,
    "sender": "mcp-snakelab",
    "target": "snakelab",
    "method": "submit_single_value",
    "payload": {"parameter": "learning_rate", "value": 0.003},
}


def test_valid_envelope_parses():
    """The spec's example message is accepted as it is."""
    assert ToolEnvelope.model_validate(ENVELOPE).payload["value"] == 0.003


@pytest.mark.parametrize("version", [True, "1", 1.0, 2, None])
def test_protocol_version_must_be_the_integer_one(version):
    """true, "1", 1.0, 2 and null are all refused with a message naming the field."""
    with pytest.raises(ValidationError, match="protocol_version"):
        ToolEnvelope.model_validate({**ENVELOPE, "protocol_version": version})


@pytest.mark.parametrize("key", list(ENVELOPE))
def test_missing_keys_are_refused(key):
    """Every envelope key is required."""
    data = {k: v for k, v in ENVELOPE.items() if k != key}
    with pytest.raises(ValidationError, match=key):
        ToolEnvelope.model_validate(data)


def test_extra_keys_and_non_object_payloads_are_refused():
    """An extra key or a payload that is not an object is an error."""
    with pytest.raises(ValidationError, match="extra"):
        ToolEnvelope.model_validate({**ENVELOPE, "request_id": "x"})
    for payload in ([], "x", 1, None):
        with pytest.raises(ValidationError, match="payload"):
            ToolEnvelope.model_validate({**ENVELOPE, "payload": payload})
    with pytest.raises(ValidationError, match="sender"):
        ToolEnvelope.model_validate({**ENVELOPE, "sender": 5})


@pytest.mark.parametrize("value", [True, False, "0.1", math.nan, math.inf, -math.inf, None, [1]])
def test_payload_values_must_be_finite_numbers(value):
    """Booleans, strings, NaN, infinities, null and lists are refused as values."""
    with pytest.raises(ValidationError, match="value"):
        SubmitSingleValuePayload.model_validate({"parameter": "gamma", "value": value})
    with pytest.raises(ValidationError, match="value_2"):
        SubmitPairValuesPayload.model_validate(
            {"pair": "reward_pair", "value_1": 1, "value_2": value}
        )


def test_payloads_accept_ints_and_floats_and_refuse_extra_fields():
    """JSON integers and numbers are accepted; an unexpected field is not."""
    assert (
        SubmitSingleValuePayload.model_validate({"parameter": "hidden_size", "value": 64}).value
        == 64
    )
    with pytest.raises(ValidationError, match="extra"):
        SubmitSingleValuePayload.model_validate({"parameter": "gamma", "value": 0.9, "x": 1})


def test_each_entrys_payload_is_its_methods_fields_in_order():
    """An MCP server forwards the entry's name under the method's name field, then its values
    by argument name, in the contract's order; ints stay ints."""
    for entry in registry.ENTRIES:
        assert payload_fields(entry.tool_name)[1:] == entry.value_names
    assert list(payload_for(registry.entry("gamma"), {"value": 0.97}).items()) == [
        ("parameter", "gamma"),
        ("value", 0.97),
    ]
    pair = payload_for(registry.entry("reward_pair"), {"value_2": -1, "value_1": 3})
    assert list(pair.items()) == [("pair", "reward_pair"), ("value_1", 3), ("value_2", -1)]
    assert type(pair["value_1"]) is int
    with pytest.raises(ValidationError, match="finite"):
        payload_for(registry.entry("gamma"), {"value": math.inf})


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (True, "value must be a JSON number, not the boolean true"),
        ("0.97", 'value must be a JSON number, not the string "0.97"'),
        (None, "value must be a JSON number, not null"),
        ([0.97], "value must be a JSON number, not [0.97]"),
        (math.nan, "value must be a finite number, not NaN"),
        (-math.inf, "value must be a finite number, not -Infinity"),
    ],
)
def test_the_one_number_check_says_what_is_wrong(value, problem):
    """Every place that checks a submitted value (the MCP tools, the broker, the payload
    models) says the same thing; ints and finite floats pass."""
    assert number_problem("value", value) == problem
    assert number_problem("value", 10**400) is None and number_problem("value", -0.5) is None


def test_control_request_is_exactly_four_keys():
    """SnakeLab's request refuses an extra key such as sender and an empty request_id."""
    good = {"protocol_version": 1, "request_id": "abc", "method": "health", "payload": {}}
    assert ControlRequest.model_validate(good).method == "health"
    with pytest.raises(ValidationError):
        ControlRequest.model_validate({**good, "sender": "x"})
    with pytest.raises(ValidationError):
        ControlRequest.model_validate({**good, "request_id": ""})
    with pytest.raises(ValidationError):
        ControlRequest.model_validate({**good, "protocol_version": True})


def test_run_status_refuses_booleans_for_numbers():
    """A status object with a boolean high score is not accepted."""
    status = {
        "run_id": "r",
        "state": "running",
        "epochs": 1500,
        "completed_epochs": 3,
        "total_steps": 10,
        "high_score": 2,
        "total_reward": 1.5,
        "epsilon_injections": 0,
        "last_loss": None,
        "move_delay_ms": 0,
        "last_episode": None,
    }
    assert not RunStatus.model_validate(status).terminal
    with pytest.raises(ValidationError, match="high_score"):
        RunStatus.model_validate({**status, "high_score": True})
