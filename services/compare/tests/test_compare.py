"""``ax3l-compare`` end to end (real services on the surrogate, throwaway databases) and its
argument checks and least-privilege environments."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import statistics
import subprocess
import sys
from itertools import accumulate

import pytest

from ax3l.compare import main as compare_main
from ax3l.compare import processes
from ax3l.compare.settings import load_settings
from ax3l.compare.throwaway import RepeatDatabases
from ax3l.shared.config_schema import load_schema
from ax3l.shared.settings import PROPOSER_NAMES
from ax3l.shared.waiting import WaitTimeout, wait_until
from ax3l.testing.databases import ADMIN_KEYS, compare_environment, run_module
from snakelab.trainers.surrogate import expected_high_score, predict_high_score


def test_a_tiny_comparison_runs_every_repeat_through_the_services_and_stores_it(
    databases, db_env, tmp_path
):
    """The control arm and 2 proposers x 2 repeats x 4 runs, re-tested after 2 and 4 runs on 2
    held-out seeds, two side by side: every tuned repeat is stored with a 4-run best-so-far
    curve whose run 1 is the surrogate's score of the default configuration on the repeat's
    seed; every re-test score is the surrogate's score of the stored recommendation on the
    held-out seed, its expected score the surrogate's; the control arm recommends exactly the
    default configuration; the CSV holds the same runs and re-tests."""
    out = tmp_path / "out.csv"
    args = ["--proposers", "random,tpe", "--repeats", "2", "--budget", "4", "--parallel", "2"]
    args += ["--retest", "2", "--retest-at", "2"]
    env = compare_environment(databases, db_env)
    completed = run_module("ax3l.compare", *args, "--csv", str(out), env=env, timeout=600)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "held-out verdict" in completed.stdout and "P(A beats B)" in completed.stdout
    assert "wall time of the whole comparison" in completed.stdout

    [(comparison_id, state, proposers, repeats, budget, content)] = databases.query(
        "SELECT comparison_id, state, proposers, repeats, budget, content FROM comparisons",
        user="ax3l",
    )
    assert (state, proposers, repeats, budget) == ("finished", "default,random,tpe", 2, 4)
    rows = databases.query(
        "SELECT proposer, repeat_index, seed, state, runs, best_so_far, content,"
        " accepted_proposals, wasted_turns FROM comparison_repeats ORDER BY proposer, repeat_index",
        user="ax3l",
    )
    retests = databases.query(
        "SELECT proposer, repeat_index, at_runs, seed, run_id, score, failed_run_ids"
        " FROM comparison_retests ORDER BY proposer, repeat_index, at_runs, seed",
        user="ax3l",
    )
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
        ("default", 0, 1970, "finished", 1),
        ("default", 1, 1971, "finished", 1),
        ("random", 0, 1970, "finished", 4),
        ("random", 1, 1971, "finished", 4),
        ("tpe", 0, 1970, "finished", 4),
        ("tpe", 1, 1971, "finished", 4),
    ]
    held_out = json.loads(content)["retest"]["seeds"]
    # Two held-out seeds of its own for each repeat, shared by its arms.
    assert held_out == [1970 + 1_000_000 + k for k in range(4)]
    assert json.loads(content)["retest"]["per_repeat"] == 2
    default = load_schema().default_config()
    stored_lines = []
    picks = {}
    for proposer, index, seed, _, runs, curve_text, content_text, accepted, wasted in rows:
        repeat = json.loads(content_text)
        curve, scores = json.loads(curve_text), repeat["scores"]
        assert scores[0] == predict_high_score({**default, "seed": seed})
        assert curve == list(accumulate(scores, max))
        assert accepted == runs - 1  # runs 2..4 are proposals (no rotation this early)
        assert wasted == 0
        for pick in repeat["recommendations"]:
            picks[proposer, index, pick["at_runs"]] = pick
            assert pick["expected_score"] == pytest.approx(expected_high_score(pick["config"]))
            assert pick["config"]["seed"] < min(held_out)
            if proposer == "default":
                assert pick["config"] == {**default, "seed": seed}
        stored_lines += [
            [str(comparison_id), proposer, str(index), str(seed), str(k), str(s), str(b), "run"]
            for k, (s, b) in enumerate(zip(scores, curve, strict=True), start=1)
        ]
    assert sorted(picks) == [
        (p, i, b) for p in ("default", "random", "tpe") for i in (0, 1) for b in (2, 4)
    ]
    assert len(retests) == len(picks) * 2
    for proposer, index, at_runs, seed, _, score, failed in retests:
        config = picks[proposer, index, at_runs]["config"]
        assert score == predict_high_score({**config, "seed": seed})
        assert json.loads(failed) == []
    assert sorted({r[3] for r in retests}) == held_out
    for _, index, _, seed, *_ in retests:
        assert seed in held_out[2 * index : 2 * index + 2]
    # The closing verdict table shows each proposer's IQM of its repeats' held-out means and
    # the mean best observed, as computed here from the stored rows.
    lines = completed.stdout.splitlines()
    table = lines[lines.index(next(x for x in lines if x.startswith("held-out verdict"))) + 2 :]
    for proposer in ("default", "random", "tpe"):
        means = sorted(
            statistics.mean(r[5] for r in retests if r[:3] == (proposer, index, 4))
            for index in (0, 1)
        )  # IQM of two values drops nothing: their mean
        best = statistics.mean(json.loads(r[5])[-1] for r in rows if r[0] == proposer)
        shown = next(x for x in table if x.startswith(proposer)).split()
        assert shown[2] == f"{statistics.mean(means):.2f}", shown
        assert shown[7] == f"{best:.2f}", shown
    assert "held-out IQM [95% interval] of the recommendation after each run count" in (
        completed.stdout
    )
    with out.open() as handle:
        lines = list(csv.DictReader(handle))
    columns = ("comparison_id", "proposer", "repeat", "seed", "simulations", "score")
    assert [
        [line[c] for c in (*columns, "best_so_far", "row")]
        for line in lines
        if line["row"] == "run"
    ] == stored_lines
    assert sorted(
        (line["proposer"], int(line["repeat"]), int(line["at_runs"]), int(line["retest_seed"]),
         line["run_id"], int(line["score"]))
        for line in lines
        if line["row"] == "retest"
    ) == sorted(r[:6] for r in retests)  # fmt: skip


def test_unknown_proposers_and_a_model_proposer_without_a_server_are_refused(capsys, monkeypatch):
    """Names are the orchestrator's own list; llm needs --url or AX3L_LLM_URL (exit 2)."""
    assert compare_main.main(["--proposers", "random,hillclimb"]) == 2
    assert f"the orchestrator accepts {', '.join(PROPOSER_NAMES)}" in capsys.readouterr().err
    assert compare_main.main(["--proposers", "tpe", "--pairs", "tpe:llm"]) == 2
    assert "--pairs tpe:llm" in capsys.readouterr().err
    assert compare_main.main(["--proposers", "tpe", "--retest-at", "60"]) == 2
    monkeypatch.delenv("AX3L_LLM_URL", raising=False)
    assert compare_main.main(["--proposers", "tpe,llm"]) == 2
    assert "llm needs a model server" in capsys.readouterr().err


def test_services_get_their_own_login_and_never_the_admin_one():
    """The admin login reaches no service; SnakeLab's login only SnakeLab, Ax3l's only Ax3l's
    services; the user's Ax3l settings (model server, token cap) pass through."""
    environ = {
        "PATH": "/usr/bin",
        "DB_USER": "ax3l",
        "DB_PASSWORD": "ax3l-secret",
        "SNAKELAB_DB_USER": "snakelab",
        "SNAKELAB_DB_PASSWORD": "snakelab-secret",
        "AX3L_DB_ADMIN_USER": "root",
        "AX3L_DB_ADMIN_PASSWORD": "admin-secret",
        "AX3L_REPORTS_DB_PASSWORD": "reports-secret",
        "AX3L_LLM_MAX_TOKENS": "256",
        "AX3L_ORCHESTRATOR_PORT": "28871",
    }
    settings = load_settings(environ)
    pair = RepeatDatabases(settings, "ax3l_cmpx", "snakelab_cmpx")
    ax3l_env = {
        **processes.base_env(environ),
        **processes.ax3l_passthrough(environ),
        **pair.ax3l_env(),
    }
    snakelab_env = {**processes.base_env(environ), **pair.snakelab_env()}
    assert ax3l_env["AX3L_LLM_MAX_TOKENS"] == "256"
    assert ax3l_env["AX3L_DB_NAME"] == "ax3l_cmpx" and "AX3L_ORCHESTRATOR_PORT" not in ax3l_env
    for env, foreign in ((ax3l_env, "snakelab-secret"), (snakelab_env, "ax3l-secret")):
        values = set(env.values())
        assert not {"admin-secret", "reports-secret", foreign} & values
        assert not any(key in env for key in (*ADMIN_KEYS, "AX3L_REPORTS_DB_PASSWORD"))
    assert snakelab_env["SNAKELAB_DB_PASSWORD"] == "snakelab-secret"


def _children_of_the_comparison(logs: str) -> list[int]:
    """Processes whose command line or environment names the comparison's log folder, or that
    have a file in it open (a service forked by the preloader keeps the preloader's command
    line and initial environment, but writes to its log there)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
            files = [
                os.readlink(f"/proc/{entry}/fd/{fd}") for fd in os.listdir(f"/proc/{entry}/fd")
            ]
        except OSError:
            continue
        if logs.encode() in environ or logs.encode() in cmdline or any(logs in f for f in files):
            found.append(int(entry))
    return found


def test_sigterm_stops_every_repeat_service_and_drops_its_databases(databases, db_env, tmp_path):
    """A SIGTERM while repeats run (slow surrogate runs) stops their SnakeLab, broker and
    orchestrator and drops their throwaway databases, as Ctrl-C does, instead of leaving them
    running."""
    import signal
    import time

    logs = tmp_path / "logs"
    args = ["--proposers", "random", "--repeats", "1", "--budget", "20", "--surrogate-seconds", "3"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ax3l.compare", *args, "--logs", str(logs)],
        env=compare_environment(databases, db_env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(
            (logs / "random-0" / "orchestrator.log").exists,
            120,
            "the first repeat's orchestrator",
            interval=0.2,
            give_up=lambda: None if proc.poll() is None else f"exited: {proc.stdout}",
        )
        time.sleep(3)  # the services are up and a run trains
        started = len(os.listdir(logs / "random-0"))
        running = len(_children_of_the_comparison(str(logs)))
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert started >= 3
    assert running >= 3  # SnakeLab, the broker and the orchestrator (forked) were found
    with contextlib.suppress(WaitTimeout):
        wait_until(lambda: not _children_of_the_comparison(str(logs)), 15, interval=0.2)
    assert _children_of_the_comparison(str(logs)) == []
    assert databases.query("SELECT state FROM comparisons", user="ax3l") != [("running",)]
