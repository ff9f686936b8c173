"""Held-out re-tests: the seeds, the recommendation at each point, and a re-test run that fails
or is killed (run again, never dropped, never counted twice)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from typing import Any

import pytest

from ax3l.compare import main as compare_main
from ax3l.compare import processes
from ax3l.compare.repeat import write_schema
from ax3l.compare.retest import (
    HELD_OUT_OFFSET,
    RETEST_ATTEMPTS,
    Golden,
    Recommendation,
    RetestFailed,
    check_disjoint,
    held_out_seeds,
    highest_tuning_seed,
    recommendations,
    retest,
    retest_points,
    snakelab_runs,
)
from ax3l.compare.settings import load_settings
from ax3l.compare.throwaway import repeat_databases
from ax3l.shared.config_schema import load_schema
from ax3l.shared.waiting import wait_until
from ax3l.testing.databases import ADMIN_KEYS
from snakelab.trainers.surrogate import expected_high_score, predict_high_score


def test_each_repeat_has_held_out_seeds_of_its_own_shared_by_its_arms_never_a_tuning_seed():
    """Repeat i of every proposer re-tests on the same K seeds, another K than every other
    repeat's (the control arm's score is then a fresh draw in each repeat, not one fixed draw
    that every paired difference shares), all above the highest seed any repeat can tune on
    (its seed plus one rotation per run); a comparison big enough to reach them is refused."""
    plans = compare_main.plans(["default", "random", "tpe"], 10, 50, 1970, 5, (50,))
    by_repeat: dict[int, set[tuple[int, ...]]] = {}
    for plan in plans:
        by_repeat.setdefault(plan.index, set()).add(plan.retest_seeds)
    assert all(len(seeds) == 1 for seeds in by_repeat.values())
    each = [next(iter(by_repeat[i])) for i in range(10)]
    assert (
        each[0]
        == tuple(held_out_seeds(1970, 5))
        == tuple(1970 + HELD_OUT_OFFSET + j for j in range(5))
    )
    assert each[3] == tuple(1970 + HELD_OUT_OFFSET + 15 + j for j in range(5))
    every = [seed for seeds in each for seed in seeds]
    assert len(set(every)) == 50
    tuning = {plan.seed + rotations for plan in plans for rotations in range(plan.budget + 1)}
    assert max(tuning) == highest_tuning_seed(1970, 10, 50)
    assert not tuning & set(every)
    check_disjoint(1970, 10, 50, 5)
    with pytest.raises(ValueError, match="must stay below"):
        check_disjoint(1970, 10, HELD_OUT_OFFSET - 9, 5)
    check_disjoint(1970, 10, HELD_OUT_OFFSET, 0)  # no re-tests, nothing to collide


def test_retest_points_are_the_chosen_run_counts_and_the_budget():
    """--retest-at 10,25 with budget 50 re-tests after 10, 25 and 50 runs; the budget always."""
    assert retest_points(50, [25, 10, 50]) == [10, 25, 50]
    assert retest_points(50, []) == [50]


def test_the_recommendation_after_b_runs_is_the_latest_golden_among_the_first_b_runs():
    """Goldens from runs 1, 3 and 7: after 2 runs the seeding golden, after 5 run 3's, after
    10 run 7's; the expected score is the surrogate's, or None off the surrogate."""
    default = load_schema().default_config()
    better = {**default, "seed": 1970}
    goldens = [
        Golden("r1", default),
        Golden("r3", better),
        Golden("r7", {**better, "seed": 1971}),
    ]
    run_ids = [f"r{k}" for k in range(1, 11)]
    found = recommendations(goldens, run_ids, [2, 5, 10], surrogate=True)
    assert [(r.at_runs, r.golden_run_id) for r in found] == [(2, "r1"), (5, "r3"), (10, "r7")]
    assert found[0].expected_score == expected_high_score(default)
    assert recommendations(goldens, run_ids, [10], surrogate=False)[0].expected_score is None


class ScriptedRuns:
    """A ``RunSource`` whose runs end as scripted per seed: each entry is one run's ending
    (``"failed"``, ``"cancelled"``, ``"killed"``: failed by a restart, or a score). Like
    ``SnakeLabRuns`` it reuses a stored usable run of a configuration."""

    def __init__(self, script: dict[int, list[Any]]):
        self.script = {seed: list(endings) for seed, endings in script.items()}
        self.runs: dict[str, tuple[int, Any]] = {}
        self.submitted: list[str] = []

    async def reuse_or_submit(self, config: dict[str, Any]) -> str:
        seed = config["seed"]
        for run_id, (run_seed, ending) in self.runs.items():
            if run_seed == seed and isinstance(ending, int):
                return run_id
        run_id = f"run-{len(self.submitted)}"
        self.submitted.append(run_id)
        self.runs[run_id] = (seed, self.script[seed].pop(0))
        return run_id

    async def ended(self, run_id: str) -> tuple[str, int | None]:
        ending = self.runs[run_id][1]
        if isinstance(ending, int):
            return "completed", ending
        return ("failed" if ending == "killed" else ending), None


def _pick() -> Recommendation:
    return Recommendation(50, "golden", {**load_schema().default_config(), "seed": 1970}, 39.0)


def test_a_failed_or_killed_retest_run_is_run_again_and_each_seed_counts_one_run():
    """Seed 1: killed then 41; seed 2: cancelled, failed, then 38; seed 3: 44 at once. Every
    seed has exactly one score, from its completed run, and keeps the runs that failed."""
    runs = ScriptedRuns({1: ["killed", 41], 2: ["cancelled", "failed", 38], 3: [44]})
    [point] = asyncio.run(retest(runs, [_pick()], [1, 2, 3], interval=0))
    assert [(s.seed, s.score) for s in point.seeds] == [(1, 41), (2, 38), (3, 44)]
    assert [len(s.failed_run_ids) for s in point.seeds] == [1, 2, 0]
    counted = [s.run_id for s in point.seeds]
    assert len(set(counted)) == 3 and not set(counted) & {
        r for s in point.seeds for r in s.failed_run_ids
    }
    assert point.scores == [41, 38, 44] and point.mean == pytest.approx(41.0)
    assert len(runs.submitted) == 6  # 3 seeds + 3 runs again, none more


def test_a_seed_that_never_scores_fails_the_repeat_instead_of_being_dropped():
    """RETEST_ATTEMPTS failed runs of one seed raise RetestFailed naming the seed and runs."""
    runs = ScriptedRuns({1: [40], 2: ["failed"] * RETEST_ATTEMPTS})
    with pytest.raises(RetestFailed, match="2 \\(runs run-1, run-2, run-3\\)"):
        asyncio.run(retest(runs, [_pick()], [1, 2], interval=0))


def test_the_same_recommendation_at_two_points_is_run_once():
    """Unchanged between 25 and 50 runs: one set of re-test runs backs both points."""
    runs = ScriptedRuns({1: [40], 2: [42]})
    pick = _pick()
    earlier = Recommendation(25, pick.golden_run_id, pick.config, pick.expected_score)
    points = asyncio.run(retest(runs, [earlier, pick], [1, 2], interval=0))
    assert [p.mean for p in points] == [41.0, 41.0] and len(runs.submitted) == 2


def test_a_retest_run_killed_with_snakelab_is_run_again_on_the_real_snakelab(
    databases, db_env, tmp_path
):
    """The reference SnakeLab (3 s surrogate runs: the kill must land while the first trains,
    also on a loaded machine) is SIGKILLed while the first re-test run
    trains and restarted on its port: it records that run and the queued one failed, each seed
    is run again through SnakeLabRuns, and SnakeLab ends holding exactly those four runs, the
    two counted with the surrogate's score of the recommendation on their seed."""
    env = {**databases.env(), **{k: db_env[k] for k in ADMIN_KEYS}}
    settings = load_settings(env)
    schema_path = tmp_path / "schema.json"
    schema = write_schema(settings, 1970, schema_path)
    config = schema.default_config()
    seeds = held_out_seeds(1970, 2)
    base = processes.base_env(dict(os.environ))
    with repeat_databases(settings) as dbs:
        snakelab_env = {**base, **dbs.snakelab_env()}
        first, endpoint = processes.start_snakelab(snakelab_env, tmp_path, 3.0, schema_path)
        port = int(endpoint.rsplit(":", 1)[1])
        services = [first]
        conn = dbs.connect()
        try:

            def statuses() -> list[str]:
                with conn.cursor() as cur:
                    cur.execute(
                        f"SELECT status FROM `{dbs.snakelab_db}`.simulation_runs ORDER BY id"
                    )
                    return [row[0] for row in cur.fetchall()]

            def kill_and_restart() -> None:
                # Both seeds submitted, the first training: the submissions are sequential, so
                # on a loaded machine "running" alone can come before the second is queued.
                wait_until(
                    lambda: statuses() == ["running", "queued"], 30, "one run training, one queued"
                )
                os.kill(first.pid, signal.SIGKILL)
                first.popen.wait(10)
                again, _ = processes.start_snakelab(snakelab_env, tmp_path, 3.0, schema_path, port)
                services.append(again)

            killer = threading.Thread(target=kill_and_restart)
            killer.start()

            async def scenario() -> Any:
                async with snakelab_runs(dbs.settings, schema, [endpoint], 0.05) as runs:
                    pick = Recommendation(50, "golden", config, None)
                    return await retest(runs, [pick], seeds, interval=0.05)

            [point] = asyncio.run(scenario())
            killer.join(30)
            final = statuses()
        finally:
            conn.close()
            for service in services:
                service.stop(processes.STOP_TIMEOUT)
    assert sorted(final) == ["completed", "completed", "failed", "failed"]
    assert [len(s.failed_run_ids) for s in point.seeds] == [1, 1]
    assert [s.score for s in point.seeds] == [
        predict_high_score({**config, "seed": seed}) for seed in seeds
    ]
