"""Arms with a promotion policy (issue 24): ``X@confirm`` parsed and validated, held-out seeds
disjoint from every confirmation seed, the per-repeat promotion figures, and one
``random@confirm`` repeat end to end through the real services."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ax3l.compare import main as compare_main
from ax3l.compare import repeat as compare_repeat
from ax3l.compare.arms import Arm, ArmError, parse_arm, policy_pairs
from ax3l.compare.promotions import promotion_figures
from ax3l.compare.retest import (
    CONFIRMATION_OFFSET,
    Golden,
    check_disjoint,
    confirmation_seed_range,
    confirmation_seeds,
    held_out_seeds,
    recommendations,
)
from ax3l.orchestrator import racing as confirmation
from ax3l.shared.config_schema import load_schema
from ax3l.testing.databases import compare_environment
from snakelab.trainers.surrogate import expected_high_score, predict_high_score


def _check(*argv: str, env: dict[str, str] | None = None) -> list[str]:
    return compare_main.check_args(compare_main.parse_args(list(argv)), env or {})


def test_an_arm_is_a_proposer_with_an_optional_promotion_policy():
    """X and X@single run X under single, X@confirm under confirm and keep the suffix in its
    name; an unknown policy and a policy on the control arm are refused."""
    assert parse_arm("tpe") == Arm("tpe", "tpe", "single")
    assert parse_arm("tpe@single") == Arm("tpe", "tpe", "single")
    assert parse_arm(" llm+tpe@confirm ") == Arm("llm+tpe@confirm", "llm+tpe", "confirm")
    assert parse_arm("default@single") == Arm("default", "default", "single")
    with pytest.raises(ArmError, match="unknown promotion policy 'twice'"):
        parse_arm("tpe@twice")
    with pytest.raises(ArmError, match="unknown promotion policy ''"):
        parse_arm("tpe@")
    with pytest.raises(ArmError, match="control arm default is never tuned"):
        parse_arm("default@confirm")
    assert policy_pairs(["default", "tpe", "tpe@confirm", "random@confirm"]) == [
        ("tpe@confirm", "tpe")
    ]


def test_the_arguments_name_arms_and_refuse_what_makes_no_sense(capsys):
    """--proposers takes arms (the control arm still first); tpe and tpe@single are one arm;
    --pairs names arms; bad suffixes exit 2 with the reason."""
    assert _check("--proposers", "tpe,tpe@confirm,random@single") == [
        "default",
        "tpe",
        "tpe@confirm",
        "random",
    ]
    args = compare_main.parse_args(["--proposers", "random@confirm,random", "--pairs", ""])
    proposers = compare_main.check_args(args, {})
    args.pairs = "random@confirm:random@single"
    assert compare_main.named_pairs(args, proposers) == [("random@confirm", "random")]
    for argv, message in (
        (["--proposers", "tpe@fast"], "unknown promotion policy 'fast'"),
        (["--proposers", "default@confirm,tpe"], "control arm default is never tuned"),
        (["--proposers", "tpe,tpe@single"], "distinct names"),
        (["--proposers", "hillclimb@confirm"], "unknown proposer hillclimb@confirm"),
    ):
        assert compare_main.main(argv) == 2, argv
        assert message in capsys.readouterr().err, argv


def test_held_out_seeds_never_meet_a_confirmation_seed_of_any_repeat():
    """The orchestrator confirms on seed + 1,000,000 + k for the seed it tunes on, which reaches
    --seed + 1,000,001 and up: a comparison with a confirm arm re-tests above every seed a
    repeat can confirm on, the seed rotations included, and one too large is refused."""
    assert confirmation_seeds(1404, 3) == confirmation.confirmation_seeds(1404, 3)
    assert CONFIRMATION_OFFSET == confirmation.SEED_OFFSET
    repeats, budget, confirm = 10, 150, 10
    single = held_out_seeds(1970, 5)
    confirming = held_out_seeds(1970, 5, confirm)
    reachable = {
        c
        for plan in compare_main.plans(
            ["tpe@confirm"], repeats, budget, 1970, 5, (), "golden", confirm
        )
        for rotations in range(plan.budget + 1)  # one rotation per run at most
        for c in confirmation.confirmation_seeds(plan.seed + rotations, confirm)
    }
    assert set(single) & reachable  # the spec-only seeds would be confirmation seeds
    every = {s for i in range(repeats) for s in held_out_seeds(1970, 5, confirm, i)}
    assert set(confirming) <= every and not every & reachable
    span = confirmation_seed_range(1970, repeats, budget, confirm)
    assert (span[0], span[-1]) == (min(reachable), max(reachable))
    check_disjoint(1970, repeats, budget, 5, confirm)
    with pytest.raises(ValueError, match="AX3L_CONFIRM_SEEDS must stay below"):
        check_disjoint(1970, 10, CONFIRMATION_OFFSET - 15, 5, confirm)
    check_disjoint(1970, 10, CONFIRMATION_OFFSET - 15, 5)  # no confirm arm: no such seeds
    # ax3l-compare takes R from AX3L_CONFIRM_SEEDS, and only when an arm confirms.
    too_big = ["--repeats", "10", "--budget", str(CONFIRMATION_OFFSET - 15)]
    with pytest.raises(compare_main.UsageError, match="AX3L_CONFIRM_SEEDS"):
        _check("--proposers", "tpe@confirm", *too_big, env={"AX3L_CONFIRM_SEEDS": "10"})
    _check("--proposers", "tpe@confirm", *too_big, env={"AX3L_CONFIRM_SEEDS": "4"})
    _check("--proposers", "tpe", *too_big, env={"AX3L_CONFIRM_SEEDS": "10"})


def test_a_golden_decided_on_later_runs_is_no_recommendation_yet():
    """A confirmed golden of run 4 written when SnakeLab held 6 runs is the recommendation
    after 6 runs, not after 5 (its confirmation runs 5 and 6 were not spent yet)."""
    default = load_schema().default_config()
    goldens = [Golden("r1", default, "seeding", 3), Golden("r4", {**default, "seed": 1}, None, 6)]
    run_ids = [f"r{k}" for k in range(1, 8)]
    found = recommendations(goldens, run_ids, [2, 3, 5, 6], surrogate=False)
    assert [(r.at_runs, r.golden_run_id) for r in found] == [(3, "r1"), (5, "r1"), (6, "r4")]


def _with_hidden_size(config: dict[str, Any], size: int) -> dict[str, Any]:
    return {**config, "model": {**config["model"], "hidden_size": size}}


def test_promotion_figures_count_within_the_budget_and_judge_each_promotion():
    """Promotions, confirmation runs and decisions count only within the budget's runs; each
    promotion is judged against the golden before it by the surrogate's expected score."""
    default = load_schema().default_config()
    better, worse = _with_hidden_size(default, 192), _with_hidden_size(default, 64)
    goldens = [
        Golden("r1", default, "seeding", 3),
        Golden("r4", better, "promotion", 6),
        Golden("r7", worse, "promotion", 9),
        Golden("r10", default, "promotion", 12),  # decided after the budget's runs
    ]
    run_ids = [f"r{k}" for k in range(1, 11)]
    submitted = [
        {"run_id": run, "purpose": "confirmation"} for run in ("r2", "r3", "r5", "r6", "r11")
    ] + [{"run_id": "r8", "purpose": "seeding"}, {"run_id": "r9"}]
    decided = [
        {"decision": "promoted", "candidate_runs": ["r4", "r5"], "golden_runs": ["r1", "r2"]},
        {"decision": "retained", "candidate_runs": ["r10", "r11"], "golden_runs": ["r4"]},
    ]
    found = promotion_figures("confirm", goldens, run_ids, submitted, decided, surrogate=True)
    assert (found.promotions, found.confirmation_runs) == (2, 4)
    assert found.confirmations == {"promoted": 1}
    assert found.checks is not None
    assert [(c.run_id, c.replaced_run_id, c.improved) for c in found.checks] == [
        ("r4", "r1", True),
        ("r7", "r4", False),
    ]
    assert found.checks[0].expected_score == expected_high_score(better)
    assert found.improved == 1 and found.content()["improved"] == 1
    off = promotion_figures("single", goldens, run_ids, [], [], surrogate=False)
    assert off.checks is None and "checks" not in off.content()


# The end-to-end repeat. On seed 1404 the default configuration collapses (high score 1), and
# every other hidden_size scores higher there and has a higher mean over the seed and its two
# confirmation seeds than the default: random's first proposal (the round robin starts with
# hidden_size) is a candidate, and confirmed, whatever value it draws. Under confirm, runs are:
# 1 seeding, 2-3 the seeding golden's confirmation runs, 4 the candidate, 5-6 its confirmation
# runs (the golden's are reused), then the promotion is written before run 7, the next proposal.
SEED, BUDGET = 1404, 7


def test_the_scenario_promotes_whatever_random_draws():
    """The premise of the end-to-end test, from the surrogate itself."""
    default = {**load_schema().default_config(), "seed": SEED}
    seeds = [SEED, *confirmation.confirmation_seeds(SEED, 2)]
    golden = [predict_high_score({**default, "seed": s}) for s in seeds]
    for size in range(64, 385, 16):
        if size == default["model"]["hidden_size"]:
            continue
        candidate = _with_hidden_size(default, size)
        assert predict_high_score(candidate) > golden[0], size
        assert sum(predict_high_score({**candidate, "seed": s}) for s in seeds) > sum(golden)


def test_a_random_at_confirm_repeat_confirms_and_stores_what_its_database_held(
    databases, db_env, monkeypatch, capsys
):
    """One random@confirm repeat (seed 1404, 7 runs, 1 held-out seed): its orchestrator ran
    under confirm (the seeding golden carries its confirmation mean, a confirmation started
    and was decided), and the stored row's promotions, confirmation runs and expected-score
    checks equal what the repeat's own database held before it was dropped; its held-out
    seed is none of the seeds its runs used."""
    snapshots: list[dict[str, Any]] = []
    read = compare_repeat.read_promotion_figures

    def reading(cur: Any, policy: str, goldens: Any, run_ids: Any, **options: Any) -> Any:
        snapshots.append(_snapshot(cur, list(run_ids)))
        return read(cur, policy, goldens, run_ids, **options)

    monkeypatch.setattr(compare_repeat, "read_promotion_figures", reading)
    argv = ["--proposers", "random@confirm", "--no-control", "--repeats", "1"]
    argv += ["--budget", str(BUDGET), "--retest", "1", "--seed", str(SEED)]
    env = compare_environment(databases, db_env)
    code = compare_main.run_comparison(compare_main.parse_args(argv), env)
    output = capsys.readouterr().out
    assert code == 0, output
    assert "random@confirm confirm       1       1.00" in output, output
    [seen] = snapshots
    [(comparison,)] = databases.query("SELECT content FROM comparisons", user="ax3l")
    [(proposer, state, text)] = databases.query(
        "SELECT proposer, state, content FROM comparison_repeats", user="ax3l"
    )
    retests = tuple(databases.query("SELECT proposer, seed FROM comparison_retests", user="ax3l"))
    assert (proposer, state) == ("random@confirm", "finished")
    stored = json.loads(text)["promotion"]
    # Under confirm: the seeding golden was scored on its confirmation seeds, and the first
    # proposal was confirmed before it became the golden.
    assert seen["goldens"][0]["kind"] == "seeding"
    assert seen["goldens"][0]["confirmation_seeds"] == [SEED, *confirmation_seeds(SEED, 2)]
    assert seen["started"] >= 1 and seen["decided"][0]["decision"] == "promoted"
    assert stored["policy"] == "confirm"
    assert stored["promotions"] == seen["promotions"] == 1
    assert stored["confirmation_runs"] == seen["confirmation_runs"] == 4
    assert stored["confirmations"] == {"promoted": 1}
    assert stored["checks"] == seen["checks"]
    assert stored["improved"] == sum(
        c["expected_score"] > c["replaced_expected_score"] for c in seen["checks"]
    )
    held_out = json.loads(comparison)["retest"]["seeds"]
    assert held_out == held_out_seeds(SEED, 1, 2) and retests == (("random@confirm", held_out[0]),)
    assert not set(held_out) & set(seen["seeds"])
    assert json.loads(comparison)["promotion"] == {
        "arms": {"random@confirm": "confirm"},
        "confirm_seeds": 2,
    }


def _snapshot(cur: Any, run_ids: list[str]) -> dict[str, Any]:
    """The repeat's figures read with this test's own queries, from its live databases."""
    cur.execute("SELECT DATABASE()")
    (ax3l_db,) = cur.fetchone()
    snakelab_db = ax3l_db.replace("ax3l_", "snakelab_", 1)

    def contents(name: str) -> list[dict[str, Any]]:
        cur.execute(
            "SELECT m.content FROM events e JOIN event_messages m USING (event_id)"
            " WHERE e.name = %s ORDER BY e.event_id",
            (name,),
        )
        return [json.loads(row[0]) for row in cur.fetchall()]

    goldens = contents("golden_config_created")
    promotions = [
        (k, g)
        for k, g in enumerate(goldens)
        if g["kind"] == "promotion" and g["simulations"] <= len(run_ids)
    ]
    confirmation_runs = {
        s["run_id"] for s in contents("simulation_submitted") if s.get("purpose") == "confirmation"
    }
    cur.execute(f"SELECT seed FROM `{snakelab_db}`.configurations")
    seeds = [int(row[0]) for row in cur.fetchall()]
    return {
        "goldens": goldens,
        "promotions": len(promotions),
        "confirmation_runs": len(confirmation_runs & set(run_ids)),
        "started": len(contents("promotion_confirmation_started")),
        "decided": contents("promotion_confirmation_decided"),
        "checks": [
            {
                "run_id": g["run_id"],
                "replaced_run_id": goldens[k - 1]["run_id"],
                "expected_score": expected_high_score(g["config"]),
                "replaced_expected_score": expected_high_score(goldens[k - 1]["config"]),
            }
            for k, g in promotions
        ],
        "seeds": seeds,
    }
