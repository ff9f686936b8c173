"""Arms with ``@race`` and ``@follow``, the held-out seeds above every race seed, the model's
recommendation for a repeat (``--recommend model``) and the JSON verdict."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from ax3l.compare import main as compare_main
from ax3l.compare.arms import Arm, ArmError, parse_arm, policy_pairs
from ax3l.compare.recommend import MODEL, model_recommendations
from ax3l.compare.repeat import RepeatPlan, RepeatResult
from ax3l.compare.retest import (
    CONFIRMATION_OFFSET,
    PointRetest,
    Recommendation,
    SeedRetest,
    held_out_seeds,
)
from ax3l.shared.config_schema import cached_schema


def _check(*argv: str, env: dict[str, str] | None = None) -> list[str]:
    return compare_main.check_args(compare_main.parse_args(list(argv)), env or {})


def test_race_and_follow_suffixes_set_the_policy_and_the_golden():
    """@race and @follow set AX3L_PROMOTION and AX3L_GOLDEN, in a canonical name; repeats,
    unknown suffixes and suffixes on the control arm are refused; every suffixed arm is paired
    with its plain arm."""
    assert parse_arm("model@follow") == Arm("model@follow", "model", "single", "model")
    assert parse_arm("tpe@race") == Arm("tpe@race", "tpe", "race", "spec")
    assert parse_arm("model@follow@race") == Arm("model@race@follow", "model", "race", "model")
    assert parse_arm("tpe@single@follow") == Arm("tpe@follow", "tpe", "single", "model")
    for bad, message in (
        ("tpe@race@confirm", "at most one promotion policy"),
        ("tpe@follow@follow", "at most one promotion policy"),
        ("tpe@fast", "unknown promotion policy 'fast'"),
        ("default@follow", "control arm default is never tuned"),
        ("default@race", "control arm default is never tuned"),
    ):
        with pytest.raises(ArmError, match=message):
            parse_arm(bad)
    names = ["default", "model", "model@follow", "tpe@race", "model@race@follow"]
    assert policy_pairs(names) == [("model@follow", "model"), ("model@race@follow", "model")]


def test_a_race_arm_moves_the_held_out_seeds_above_its_race_seeds():
    """With a race arm the held-out seeds start above seed + 1,000,000 + AX3L_RACE_MAX_SEEDS of
    any seed a repeat can tune on; a race cap too large for the budget is refused."""
    assert compare_main.confirm_seeds(["default", "tpe@race"], {"AX3L_RACE_MAX_SEEDS": "12"}) == 12
    assert compare_main.confirm_seeds(["tpe@race", "tpe@confirm"], {}) == 8
    assert compare_main.confirm_seeds(["tpe", "model@follow"], {}) == 0
    assert held_out_seeds(1970, 2, 8)[0] > 1970 + CONFIRMATION_OFFSET + 10 + 150 + 8
    too_big = ["--repeats", "10", "--budget", str(CONFIRMATION_OFFSET - 20)]
    with pytest.raises(compare_main.UsageError, match="AX3L_CONFIRM_SEEDS"):
        _check("--proposers", "tpe@race", *too_big, env={"AX3L_RACE_MAX_SEEDS": "64"})
    assert _check("--proposers", "model@race@follow", "--recommend", "model") == [
        "default",
        "model@race@follow",
    ]


def _rows(count: int, seed: int = 1) -> list[dict[str, Any]]:
    """SnakeLab rows: the default configuration with batch size varied, scored by batch size
    (larger is better) plus noise; run 1 is the default."""
    schema = cached_schema()
    flat = schema.flatten(schema.default_config())
    rng = random.Random(seed)
    rows = []
    for k in range(count):
        batch = 24 if k == 0 else rng.randrange(8, 66, 2)
        row = {**flat, "training_batch_size": batch, "seed": 1970}
        score = 30 + batch / 4 + rng.gauss(0, 1.0)
        rows.append({**row, "run_id": f"run-{k}", "status": "completed", "high_score": score})
    return rows


def test_the_model_recommends_an_evaluated_run_at_each_point_and_the_golden_below_five():
    """At each point the pick is one of the first ``point`` runs (never a configuration no run
    tried), a large batch where the scores say so; below five runs the golden's stands."""
    schema = cached_schema()
    rows = _rows(30)
    golden = [Recommendation(at, "run-0", schema.unflatten(rows[0]), None) for at in (3, 15, 30)]
    picks = model_recommendations(rows, schema, golden, lower_bound=0.0, surrogate=True)
    assert picks[0] == golden[0]
    for pick in picks[1:]:
        position = int(pick.golden_run_id.split("-")[1]) + 1
        assert pick.by == MODEL and position <= pick.at_runs
        assert pick.config == schema.unflatten(rows[position - 1])
        assert pick.config["training"]["batch_size"] >= 48
        assert pick.expected_score is not None
    assert [p.at_runs for p in picks] == [3, 15, 30]


def _result(arm: str, index: int, held_out: list[int], expected: float) -> RepeatResult:
    plan = RepeatPlan(arm, index, 1970 + index, 10, (2001970, 2001971), ())
    pick = Recommendation(10, "r", {}, expected)
    seeds = [SeedRetest(2001970 + k, f"x{k}", score) for k, score in enumerate(held_out)]
    return RepeatResult(plan, "finished", scores=[40] * 10, retests=[PointRetest(pick, seeds)])


def test_the_json_verdict_has_each_arms_interval_and_its_difference_from_default(tmp_path: Path):
    """``--json``: per arm the held-out IQM with its interval, the paired difference against
    default (none for default itself), the expected scores; written whole."""
    done = [
        *(_result("default", i, [38, 40], 39.2) for i in range(4)),
        *(_result("model@follow", i, [41 + i % 2, 42], 41.0 + i / 10) for i in range(4)),
    ]
    args = compare_main.parse_args(
        ["--proposers", "model@follow", "--repeats", "4", "--budget", "10", "--retest", "2"]
    )
    pairs = [("model@follow", "default")]
    verdict = compare_main.verdict_json(done, ["default", "model@follow"], pairs, args, 12.3)
    path = tmp_path / "verdict.json"
    compare_main.write_json(path, verdict)
    read = json.loads(path.read_text())
    default, model = read["arms"]
    assert default["vs_default"] is None and default["expected_scores"] == [39.2] * 4
    assert model["heldout_iqm"]["value"] == pytest.approx(41.75, abs=0.5)
    low, high = model["vs_default"]["ci"]
    assert 0 < low <= model["vs_default"]["median"] <= high
    assert model["vs_default"]["p_beats"] == 1.0
    assert model["expected_score_mean"] == pytest.approx(41.15)
    assert read["pairs"][0]["a"] == "model@follow" and read["seconds"] == 12.3
    assert read["recommend"] == "golden" and read["failed_repeats"] == 0
    assert not list(tmp_path.glob(".*partial"))
