"""Raced promotions (``AX3L_PROMOTION=race``) against the reference SnakeLab's surrogate: only
hidden size is tunable, the golden starts at hidden size 64 (far below the rest, so a
challenger can win its race) on seed 1972. Expected scores come from the surrogate itself, not
from the loop's code."""

from __future__ import annotations

import pytest

from ax3l.orchestrator.racing import confirmation_seeds
from ax3l.shared.config_schema import ConfigSchema
from ax3l.testing.confirmation_case import submit
from ax3l.testing.stack import FIXED_EXCEPT_HIDDEN_SIZE, Stack, check_history, narrowed_schema
from snakelab.trainers.surrogate import predict_high_score

SEED = 1972
SCHEMA = narrowed_schema(
    {
        "model.hidden_size": {"minimum": 64, "maximum": 384, "default": 64},
        **FIXED_EXCEPT_HIDDEN_SIZE,
        "seed": {"default": SEED},
    }
)
RACE = {"AX3L_PROMOTION": "race", "AX3L_SEED_STAGNANT_ROUNDS": "100"}
SEEDS = confirmation_seeds(SEED, 8)
WINNER, LOSER = 208, 256  # 208 beats 64 in its race; 256 beats 208 on seed 1972, not after
THEN = {"random_call": {"hidden_size": [[64, 384, 16]]}}


def score(hidden_size: int, seed: int) -> int:
    schema = ConfigSchema(SCHEMA)
    default = schema.validate(schema.default_config())
    config = schema.with_values(default, {"model.hidden_size": hidden_size, "seed": seed})
    return predict_high_score(schema.validate(config))


def test_the_premise_each_challenger_beats_the_golden_of_its_time_on_the_current_seed() -> None:
    """The surrogate's scores the test relies on (not a behaviour of Ax3l)."""
    assert score(WINNER, SEED) > score(64, SEED)
    assert score(LOSER, SEED) > score(WINNER, SEED)


def _runs_of(stack: Stack, hidden_size: int) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for run in stack.runs():
        if run["model_hidden_size"] == hidden_size:
            found.setdefault(int(run["seed"]), []).append(str(run["run_id"]))
    return found


def test_a_race_promotes_on_a_paired_win_and_stops_a_loser_reusing_the_goldens_runs(
    stack: Stack,
) -> None:
    """The first challenger wins its race in two rounds (1 + 2 race seeds, its own first run
    left out); the second loses its race when its mean difference falls to 0 or below after
    three rounds (1 + 2 + 4 seeds), raced against the new golden's race runs from its own race,
    which run no second time. Every round is logged, scores are the surrogate's."""
    stack.use_schema(SCHEMA)
    stack.start()
    model = stack.start_model({"replies": [submit(WINNER), submit(LOSER)], "then": THEN})
    proc = stack.orchestrator("llm", url=model.url, env=RACE)
    stack.wait_for(
        lambda: stack.count("promotion_confirmation_decided") >= 2, 120, "two races", proc
    )
    proc.stop()

    won, lost = stack.events("promotion_confirmation_decided")[:2]
    assert won.get("policy") == lost.get("policy") == "race"
    assert (won.get("decision"), won.get("seeds")) == ("promoted", SEEDS[:3])
    assert won.get("candidate_scores") == [score(WINNER, s) for s in SEEDS[:3]]
    assert won.get("golden_scores") == [score(64, s) for s in SEEDS[:3]]
    assert won.get("p_value") <= won.get("threshold") == pytest.approx(0.1 / 3, abs=1e-6)
    assert (lost.get("decision"), lost.get("seeds")) == ("retained", SEEDS[:7])
    assert lost.get("candidate_scores") == [score(LOSER, s) for s in SEEDS[:7]]
    assert lost.get("golden_scores") == [score(WINNER, s) for s in SEEDS[:7]]
    assert lost.get("mean_difference") <= 0
    # The new golden's race runs on the first three seeds are its own race's, reused.
    assert lost.get("golden_runs")[:3] == won.get("candidate_runs")
    rounds = stack.events("promotion_race_round")
    assert [(r.get("round"), r.get("verdict")) for r in rounds] == [
        (1, "continue"),
        (2, "promoted"),
        (1, "continue"),
        (2, "continue"),
        (3, "retained"),
    ]
    # Each configuration ran once per seed: the trigger on 1972, then its race seeds.
    for hidden_size, seeds in ((64, 3), (WINNER, 7), (LOSER, 7)):
        runs = _runs_of(stack, hidden_size)
        assert all(len(ids) == 1 for ids in runs.values()), runs
        assert sorted(runs) == sorted([SEED, *SEEDS[:seeds]]), (hidden_size, sorted(runs))
    golden = stack.events("golden_config_created")[1]
    assert (
        golden.get("promotion_policy") == "race" and golden.get("confirmation_seeds") == SEEDS[:3]
    )
    compared = stack.events("configuration_compared")
    assert "won its race" in str(compared[0].get("reason"))
    assert "lost its race" in str(compared[1].get("reason"))
    check_history(stack)


# One race killed at each of its points in turn, every restart resuming the last one's work.
CRASHES = [
    "confirmation_started",
    "confirmation_after_submit",
    "confirmation_waiting",
    "race_round_logged",
    "confirmation_before_submit",
    "confirmation_decided",
]


@pytest.mark.long  # tens of seconds: make test-long
def test_crashes_at_every_point_of_a_race_leave_one_decision_and_no_duplicate_run(
    stack: Stack,
) -> None:
    """Killed at each point of one race in turn: each restart resumes the same race, every
    configuration runs once per seed, each round is logged once and the decision once."""
    stack.use_schema(SCHEMA)
    stack.start()
    model = stack.start_model({"replies": [submit(WINNER)], "then": THEN})
    proc = stack.orchestrator("llm", url=model.url, env={"AX3L_SEED_STAGNANT_ROUNDS": "100"})
    stack.wait_for(lambda: stack.count("golden_config_created") >= 1, 60, "seeding", proc)
    proc.kill()
    for point in CRASHES:
        stack.crash_at(point, proposer="llm", url=model.url, env=RACE)
    assert stack.count("promotion_confirmation_started") == 1
    assert stack.count("promotion_confirmation_decided") == 1
    proc = stack.orchestrator("llm", url=model.url, env=RACE)
    stack.wait_for(lambda: stack.count("golden_config_created") >= 2, 90, "the promotion", proc)
    proc.stop()

    (decided,) = stack.events("promotion_confirmation_decided")
    assert decided.get("decision") == "promoted" and decided.get("seeds") == SEEDS[:3]
    assert [r.get("round") for r in stack.events("promotion_race_round")] == [1, 2]
    for hidden_size in (64, WINNER):
        assert all(len(ids) == 1 for ids in _runs_of(stack, hidden_size).values())
    check_history(stack)
