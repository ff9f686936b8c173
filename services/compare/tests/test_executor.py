"""What the local and the Ray executor share (``executor.py``, ``throwaway.py``, ``version.py``),
checked without Ray: the Ray tier (``make test-ray``, ``tests/ray``) runs the Ray executor on a
real cluster."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket

import pytest

from ax3l.compare import main as compare_main
from ax3l.compare import processes
from ax3l.compare.executor import node_env, settings_env
from ax3l.compare.repeat import write_schema
from ax3l.compare.settings import load_settings
from ax3l.compare.throwaway import (
    comparison_token,
    drop_pairs,
    pair_prefix,
    pairs_left,
    repeat_databases,
)
from ax3l.compare.version import PACKAGES, VersionMismatch, ax3l_version, check
from ax3l.shared.processes import ProcessFailed
from ax3l.testing.databases import compare_environment


def test_the_version_is_the_installed_packages_and_a_mismatch_names_both():
    """Every Ax3l package a repeat runs is installed at one version here; another expected
    version is refused with both named."""
    from importlib import metadata

    here = ax3l_version()
    assert here == metadata.version("ax3l-compare")
    assert {metadata.version(name) for name in PACKAGES} == {here}
    assert check(here) == here
    named = re.escape(f"node-x runs Ax3l {here}, but ax3l-compare runs Ax3l 0.0.0-elsewhere")
    with pytest.raises(VersionMismatch, match=named):
        check("0.0.0-elsewhere", "node-x")
    with pytest.raises(VersionMismatch, match=re.escape(f"{os.uname().nodename} runs Ax3l")):
        check("0.0.0-elsewhere")


def test_a_node_keeps_its_own_environment_under_the_drivers_settings():
    """A repeat on another machine gets ax3l-compare's settings (AX3L_*, DB_*, SNAKELAB_*)
    over that machine's own environment, whose settings are dropped."""
    driver = {"PATH": "/driver/bin", "DB_HOST": "db.lan", "AX3L_LLM_URL": "u", "HOME": "/d"}
    sent = settings_env(driver)
    assert sent == {"DB_HOST": "db.lan", "AX3L_LLM_URL": "u"}
    node = {"PATH": "/node/bin", "DB_HOST": "stale", "SNAKELAB_DB_NAME": "stale", "LANG": "C"}
    assert node_env(sent, node) == {
        "PATH": "/node/bin",
        "LANG": "C",
        "DB_HOST": "db.lan",
        "AX3L_LLM_URL": "u",
    }


def test_an_attempt_drops_its_earlier_attempts_pairs_and_the_comparison_what_is_left(
    databases, db_env
):
    """Pairs are named after the comparison and the repeat's slot: a new attempt of slot 1
    drops slot 1's leftover pair (and no other), and dropping the comparison's token drops
    every pair of it and none of another comparison."""
    settings = load_settings(compare_environment(databases, db_env))
    token, other = comparison_token(), comparison_token()
    with (
        repeat_databases(settings, pair_prefix(token, 1)) as stale,
        repeat_databases(settings, pair_prefix(token, 12)) as neighbour,
        repeat_databases(settings, pair_prefix(other, 1)) as foreign,
    ):
        assert stale.ax3l_db.startswith(f"ax3l_{token}r1t")
        assert stale.snakelab_db == stale.ax3l_db.replace("ax3l_", "snakelab_", 1)
        with repeat_databases(settings, pair_prefix(token, 1), drop_earlier=True) as again:
            assert again.dropped_earlier == 1 and again.ax3l_db != stale.ax3l_db
            left = {a for a, _ in pairs_left(settings, token)}
            assert left == {again.ax3l_db, neighbour.ax3l_db}
            assert {a for a, _ in pairs_left(settings, other)} == {foreign.ax3l_db}
            # The comparison's end: whatever pair of it is left goes, another's stays.
            assert sorted(drop_pairs(settings, token)) == sorted(left)
            assert not pairs_left(settings, token)
            assert pairs_left(settings, other)
    assert not pairs_left(settings, other)


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="Ray is installed here")
def test_ray_without_the_extra_is_refused_before_anything_runs(databases, db_env):
    """--ray without Ray installed: refused (main's exit 2) naming the extra; no comparison is
    recorded."""
    argv = ["--proposers", "tpe", "--repeats", "1", "--budget", "2", "--ray", "auto"]
    env = compare_environment(databases, db_env)
    with pytest.raises(compare_main.UsageError, match=re.escape("ax3l-compare[ray]")):
        compare_main.run_comparison(compare_main.parse_args(argv), env)
    assert databases.query("SELECT COUNT(*) FROM comparisons", user="ax3l") == [(0,)]


def test_a_local_repeat_records_where_it_ran(databases, db_env, capsys):
    """A local comparison stores each repeat's placement (this host, no Ray node) and the
    executor in the comparison's content, and leaves no pair of its own."""
    argv = ["--proposers", "default", "--no-control", "--repeats", "1", "--budget", "1"]
    argv += ["--retest", "0"]
    env = compare_environment(databases, db_env)
    assert compare_main.run_comparison(compare_main.parse_args(argv), env) == 0, capsys.readouterr()
    [(comparison,)] = databases.query("SELECT content FROM comparisons", user="ax3l")
    [(repeat,)] = databases.query("SELECT content FROM comparison_repeats", user="ax3l")
    content = json.loads(comparison)
    assert content["executor"] == {"kind": "local", "spawn": "fork"}
    assert content["version"] == ax3l_version()
    assert json.loads(repeat)["placement"] == {
        "host": os.uname().nodename,
        "node_id": None,
        "dropped_earlier": 0,
    }
    assert not pairs_left(load_settings(env), content["databases"])


def test_a_service_whose_port_was_taken_starts_again_on_another(
    databases, db_env, tmp_path, monkeypatch
):
    """The first free port drawn for a repeat's SnakeLab is taken before SnakeLab binds it (a
    listening socket here; a Ray worker's port on a node): SnakeLab fails with "address already
    in use" and starts again on the next port drawn, which answers. Another failure is not
    retried."""
    settings = load_settings(compare_environment(databases, db_env))
    schema_path = tmp_path / "schema.json"
    write_schema(settings, 1970, schema_path)
    drawn: list[int] = []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1]])
        real = processes.free_port

        def draw() -> int:
            drawn.append(next(ports, None) or real())
            return drawn[-1]

        monkeypatch.setattr(processes, "free_port", draw)
        with repeat_databases(settings) as dbs:
            env = {**processes.base_env(dict(os.environ)), **dbs.snakelab_env()}
            service, endpoint = processes.start_snakelab(env, tmp_path, 0.0, schema_path)
            try:
                assert endpoint == f"tcp://127.0.0.1:{drawn[-1]}" and len(drawn) == 2
                assert "address already in use" in (tmp_path / "snakelab.log").read_text().lower()
            finally:
                service.stop(processes.STOP_TIMEOUT)
    calls = []

    def failing() -> None:
        calls.append(1)
        raise ProcessFailed("snakelab exited: no such schema")

    with pytest.raises(ProcessFailed, match="no such schema"):
        processes.on_free_ports(failing)
    assert len(calls) == 1
