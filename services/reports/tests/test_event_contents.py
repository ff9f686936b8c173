"""Reading event contents for display: JSON or text, replies, summaries, labels."""

from __future__ import annotations

import json

from ax3l.reports.event_contents import label, read_reply, run_links, summary
from ax3l.shared.db.event_reads import parse_message


def test_prompt_sent_is_labelled_prompt():
    """The Event filter calls prompt_sent "Prompt" as the user's page does."""
    assert label("prompt_sent") == "Prompt"
    assert label("golden_config_seed_incremented") == "Golden config seed incremented"


def test_contents_parse_as_json_only_when_they_are():
    """Objects and arrays parse; plain text (even text starting with a brace) stays text."""
    assert parse_message('{"a": 1}') == {"a": 1}
    assert parse_message("[1, 2]") == [1, 2]
    assert parse_message("{not json") == "{not json"
    assert parse_message("plain") == "plain"
    assert parse_message(None) is None


def test_reply_summary_names_the_tool_call():
    """A reply whose entry is unknown is summarised by its tool call and arguments."""
    content = json.dumps(
        {
            "choices": [
                {
                    "message": {
                        "tool_calls": [
                            {
                                "function": {
                                    "name": "submit_pair_values",
                                    "arguments": '{"value_1": 2, "value_2": -3}',
                                }
                            }
                        ]
                    }
                }
            ]
        }
    )
    assert summary("reply_received", content) == (
        "Model called submit_pair_values: value_1 = 2, value_2 = -3"
    )


def test_reply_without_tool_call_says_so():
    """A reply that answered in text is summarised as such, with its finish reason."""
    content = json.dumps({"choices": [{"finish_reason": "stop", "message": {"content": "Hmm."}}]})
    assert summary("reply_received", content) == "Model answered without a tool call: Hmm."
    reply = read_reply(parse_message(content))
    assert reply is not None and reply.tool_calls == [] and reply.finish_reason == "stop"


def test_reply_with_unparseable_arguments_keeps_the_text():
    """Arguments that are not JSON are shown as the model sent them."""
    reply = read_reply(
        {
            "choices": [
                {"message": {"tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}}
            ]
        }
    )
    assert reply is not None and reply.tool_calls[0].arguments == "{oops"


def test_usage_and_timings_keep_scalars_only():
    """Nested or boolean values in usage/timings are left out of the tables."""
    reply = read_reply(
        {
            "choices": [{"message": {"content": "x"}}],
            "usage": {"prompt_tokens": 5, "details": {"cached": 1}, "flag": True},
            "timings": {"predicted_per_second": 15.5},
        }
    )
    assert reply is not None
    assert reply.usage == {"prompt_tokens": 5} and reply.timings == {"predicted_per_second": 15.5}


def test_non_replies_are_not_read_as_replies():
    """Contents without choices are not mistaken for chat completions."""
    assert read_reply({"run_id": "x"}) is None
    assert read_reply("text") is None


def test_prompt_summary_is_its_first_line_and_long_text_is_cut():
    """Prompts show their first non-empty line; long contents end with an ellipsis."""
    assert summary("prompt_sent", "\n\nFirst line\nSecond") == "First line"
    cut = summary("configuration_compared", "x" * 500)
    assert len(cut) == 160 and cut.endswith("…")


def test_run_references_become_links():
    """Known run-id keys of a content are offered as run links; odd values are not."""
    content = {"golden_run_id": "a-1", "latest_run_id": "b-2", "run_id": 5, "other": "c"}
    assert run_links(content) == [("golden_run_id", "a-1"), ("latest_run_id", "b-2")]
    assert run_links("text") == []


def test_confirmation_runs_become_links():
    """A confirmation's candidate and each of its runs per seed are offered as run links;
    entries that are not run ids are not."""
    content = {
        "candidate_run_id": "c-1",
        "golden_run_id": "g-1",
        "candidate_runs": ["c-1", "c-2", 3, "x" * 37],
        "golden_runs": "g-2",
        "confirmation_runs": ["c-1"],
    }
    assert run_links(content) == [
        ("candidate_run_id", "c-1"),
        ("golden_run_id", "g-1"),
        ("candidate_runs", "c-1"),
        ("candidate_runs", "c-2"),
        ("confirmation_runs", "c-1"),
    ]
