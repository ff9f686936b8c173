"""Initial seeding, and the status API while the loop runs."""

from __future__ import annotations

from orchestrator_stack import new_run_compared

from ax3l.shared.config_schema import load_schema
from ax3l.testing.stack import Stack, check_history, http_json


def test_seeding_submits_the_defaults_once_and_accepts_the_first_golden(stack: Stack) -> None:
    """With no runs, the schema defaults run once and become the first golden with a snapshot."""
    stack.start()
    proc = stack.orchestrator("random")
    stack.wait_for(lambda: stack.count("configuration_compared"), 60, "a first comparison", proc)

    status = stack.status()
    assert status["proposer"] == "random"
    assert status["seed"] == 1970 and status["golden_high_score"] is not None
    assert status["snakelab_runs"] >= 2
    assert http_json(f"http://127.0.0.1:{stack.api_port}/health") == {"status": "ok"}
    assert http_json(f"http://127.0.0.1:{stack.api_port}/ready") == {
        "status": "ready",
        "checks": {"database": True, "snakelab": True, "loop": True},
        "problems": [],
    }
    assert proc.stop() == 0, "SIGTERM is a clean stop"

    defaults = load_schema().default_config()
    first_run = stack.runs()[0]
    assert first_run["model_hidden_size"] == defaults["model"]["hidden_size"]
    assert first_run["seed"] == defaults["seed"]
    submitted = stack.events("simulation_submitted")
    seeding = [e for e in submitted if e.source_name == "InitialSeeding"]
    assert len(seeding) == 1 and seeding[0].get("config") == defaults
    assert seeding[0].get("reused") is False
    golden = stack.events("golden_config_created")[0]
    assert golden.get("run_id") == first_run["run_id"] == status["golden_run_id"]
    assert golden.get("config") == defaults and golden.get("kind") == "seeding"
    assert golden.get("high_score") == first_run["high_score"]
    assert stack.highscores()[0][1:] == (1, first_run["high_score"], 1970)
    check_history(stack)

    # A restart with a golden configuration skips seeding and continues the round robin.
    # The first process may have submitted a turn of its own before SIGTERM (then the restart
    # first compares that run): wait for a run the restarted process submitted.
    proc, new_run = new_run_compared(stack)
    proc.stop()
    assert (
        len([e for e in stack.events("simulation_submitted") if e.source_name == "InitialSeeding"])
        == 1
    )
    assert len(stack.events("golden_config_created")) >= 1
    assert new_run["seed"] == defaults["seed"]
    assert check_history(stack).steps[:2] == [0, 1]


def test_tpe_is_the_default_proposer_without_a_model_and_says_so(stack: Stack) -> None:
    """No model URL: TPE proposes through the same MCP tool path, and the log says so plainly."""
    stack.start()
    proc = stack.orchestrator(None)
    stack.wait_for(lambda: stack.count("configuration_compared") >= 2, 90, "two turns", proc)
    proc.stop()
    output = proc.log_tail(200)
    assert "No model server is configured" in output and "TPE" in output
    started = stack.events("conversation_started")
    assert {e.get("proposer") for e in started} == {"tpe"}
    assert not stack.events("prompt_sent")
    accepted = stack.events("proposal_accepted")
    assert [e.get("parameter") for e in accepted][:2] == ["hidden_size", "sequence_length"]
    assert stack.events("tool_request_received"), "proposals went through the MCP tool"
    check_history(stack)
