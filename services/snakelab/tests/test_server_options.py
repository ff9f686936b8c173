"""How the server is configured: flags, environment, schema file, an unreachable database."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ax3l.shared.config_schema import load_schema
from ax3l.shared.snakelab_client import SnakeLabClient, SnakeLabError
from ax3l.testing.databases import TestDatabases as Databases
from ax3l.testing.plugin import free_port
from ax3l.testing.snakelab_process import SnakeLabProcess, run_to_exit
from snakelab.server import parse_options


def test_defaults_match_the_real_snakelab() -> None:
    """Without flags or environment: 127.0.0.1:41970, events on 41972, drqn, bundled schema."""
    options = parse_options([], {})
    assert options.control_endpoint == "tcp://127.0.0.1:41970"
    assert options.events_endpoint == "tcp://127.0.0.1:41972"
    assert options.trainer == "drqn"
    assert options.surrogate_seconds == 0.0
    assert options.schema_path is None


def test_environment_sets_defaults_and_flags_win() -> None:
    """SNAKELAB_* variables configure the server; a flag overrides its variable."""
    env = {
        "SNAKELAB_TRAINER": "surrogate",
        "SNAKELAB_SURROGATE_SECONDS": "2.5",
        "SNAKELAB_PORT": "5000",
        "SNAKELAB_EVENTS_PORT": "0",
        "SNAKELAB_SCHEMA_PATH": "/etc/snakelab/schema.json",
    }
    options = parse_options(["--port", "6000", "--address", "*"], env)
    assert options.control_endpoint == "tcp://*:6000"
    assert options.events_endpoint is None  # 0 turns events off
    assert (options.trainer, options.surrogate_seconds) == ("surrogate", 2.5)
    assert options.schema_path == "/etc/snakelab/schema.json"


@pytest.mark.parametrize(
    "env",
    [
        {"SNAKELAB_TRAINER": "ppo"},
        {"SNAKELAB_PORT": "http"},
        {"SNAKELAB_PORT": "70000"},
        {"SNAKELAB_SURROGATE_SECONDS": "-1"},
    ],
)
def test_a_bad_setting_stops_the_server_with_a_message(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown trainer or a malformed number is a usage error (exit 2), not a traceback."""
    with pytest.raises(SystemExit) as stopped:
        parse_options([], env)
    assert stopped.value.code == 2
    assert "snakelab-server: error:" in capsys.readouterr().err


def test_an_unreachable_database_exits_1_without_leaking_the_password() -> None:
    """With no database at the address the server exits 1, naming where, never the password."""
    env = {
        **os.environ,
        "SNAKELAB_DB_HOST": "127.0.0.1",
        "SNAKELAB_DB_PORT": str(free_port()),
        "SNAKELAB_DB_PASSWORD": "s3cret-value",
        "SNAKELAB_DB_WAIT_SECONDS": "0",
    }
    done = run_to_exit(env, 60)
    assert done.returncode == 1
    assert "cannot use SnakeLab's database snakelab@127.0.0.1" in done.stderr
    assert "s3cret-value" not in done.stderr + done.stdout


def strict_replay_schema(folder: Path) -> Path:
    """The bundled schema with replay memory fixed at 100 frames (too few for the defaults)."""
    document = load_schema().document
    replay = document["properties"]["training"]["properties"]["replay_max_frames"]
    replay["const"] = replay["default"] = 100
    path = folder / "schema.json"
    path.write_text(json.dumps(document))
    return path


async def test_the_schema_file_and_the_server_rules_apply_to_submits(
    snakelab_tables: Databases, tmp_path: Path
) -> None:
    """SNAKELAB_SCHEMA_PATH is the schema; replay_max_frames >= sequence x batch is enforced."""
    schema_path = strict_replay_schema(tmp_path)
    with SnakeLabProcess(
        snakelab_tables.env(),
        trainer="surrogate",
        extra_env={"SNAKELAB_SCHEMA_PATH": str(schema_path)},
    ) as server:
        client = SnakeLabClient(server.endpoint)
        with pytest.raises(SnakeLabError) as caught:
            await client.submit({})
        assert caught.value.code == "invalid_config"
        assert caught.value.message == (
            "$.training.replay_max_frames: 100 is less than sequence_length * batch_size"
            " (8 * 24 = 192)"
        )
        accepted = await client.submit({"training": {"sequence_length": 4, "batch_size": 24}})
        assert accepted.state == "queued"
