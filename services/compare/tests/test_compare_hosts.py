"""``ax3l-compare --snakelab-hosts 2``: each repeat's runs on two reference SnakeLab hosts."""

from __future__ import annotations

import json

import pytest

from ax3l.testing.databases import compare_environment, run_module
from snakelab.trainers.surrogate import predict_high_score

pytestmark = pytest.mark.long  # runs of a second on two hosts per repeat (make test-long)


def test_each_repeats_retests_spread_over_its_two_hosts(databases, db_env):
    """The control arm and one tpe repeat, each with two SnakeLab hosts sharing its database
    and 1-second runs: the tuned repeat's orchestrator runs over both hosts (its budget is
    spent, its recommendation re-tested), and each repeat's 4 held-out re-test runs, submitted
    together, went to both hosts; every re-test score is still the surrogate's score of the
    recommendation on its seed."""
    args = ["--proposers", "tpe", "--repeats", "1", "--budget", "3", "--retest", "4"]
    args += ["--surrogate-seconds", "1", "--snakelab-hosts", "2", "--parallel", "2"]
    env = compare_environment(databases, db_env)
    completed = run_module("ax3l.compare", *args, env=env, timeout=600)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    [(state, content)] = databases.query("SELECT state, content FROM comparisons", user="ax3l")
    rows = databases.query(
        "SELECT proposer, state, runs, content FROM comparison_repeats ORDER BY proposer",
        user="ax3l",
    )
    retests = databases.query("SELECT proposer, seed, score FROM comparison_retests", user="ax3l")
    assert state == "finished" and json.loads(content)["snakelab_hosts"] == 2
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("default", "finished", 1),
        ("tpe", "finished", 3),
    ]
    picks = {}
    for proposer, _, _, text in rows:
        repeat = json.loads(text)
        hosts = repeat["retest_hosts"]
        assert set(hosts) == {"h0", "h1"} and sum(hosts.values()) == 4, hosts
        (pick,) = repeat["recommendations"]
        picks[proposer] = pick["config"]
    assert len(retests) == 8
    for proposer, seed, score in retests:
        assert score == predict_high_score({**picks[proposer], "seed": seed})
