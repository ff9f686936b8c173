"""`make run`'s stack script brings the whole experiment up as real processes and stops it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ax3l.shared.snakelab_client import ping
from ax3l.testing.plugin import free_port, wait_until
from ax3l.testing.snakelab_process import SnakeLabProcess

REPO = Path(__file__).resolve().parent.parent


def _stack(env: dict[str, str], command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``scripts/stack.py COMMAND`` with exactly ``env``, output as text."""
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "stack.py"), command],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _get_json(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return json.loads(reply.read())
    except OSError:
        return None


def _count_events(databases, name: str) -> int:
    return int(databases.query("SELECT COUNT(*) FROM events WHERE name = %s", (name,))[0][0])


def _stack_env(databases, tmp_path: Path, ports: dict[str, int]) -> dict[str, str]:
    """What a user's shell gives ``stack.py``: the private MariaDB's db.env in a run dir of its
    own, free ports, the surrogate trainer and the random proposer."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "db.env").write_text(
        "\n".join(f"{key}={value}" for key, value in databases.env().items()) + "\n"
    )
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AX3L_", "SNAKELAB_", "DB_"))},
        "AX3L_RUN_DIR": str(run_dir),
        "SNAKELAB_PORT": str(ports["snakelab"]),
        "SNAKELAB_TRAINER": "surrogate",
        "SNAKELAB_SURROGATE_SECONDS": "0",
        "AX3L_ZMQ_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
        "AX3L_REPORTS_PORT": str(ports["reports"]),
        "AX3L_ORCHESTRATOR_PORT": str(ports["orchestrator"]),
        "AX3L_TOOLBROKER_PORT": str(ports["toolbroker"]),
        "AX3L_POLL_INTERVAL": "0.1",
        "AX3L_PROPOSER": "random",
    }


def test_stack_starts_runs_the_experiment_and_stops(databases, tmp_path):
    """stack.py start brings up every service, the loop makes progress, stop ends them all."""
    ports = {name: free_port() for name in ("reports", "orchestrator", "toolbroker", "snakelab")}
    env = _stack_env(databases, tmp_path, ports)
    run_dir = Path(env["AX3L_RUN_DIR"])
    try:
        started = _stack(env, "start", timeout=180)
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"http://127.0.0.1:{ports['reports']}/" in started.stdout
        again = _stack(env, "start", timeout=60)
        assert again.returncode == 0 and "already running" in again.stdout
        wait_until(
            lambda: _count_events(databases, "configuration_compared") >= 3,
            timeout=120,
            interval=0.5,
            what="three compared steps",
        )
        status = _get_json(f"http://127.0.0.1:{ports['orchestrator']}/api/status")
        assert status is not None and status.get("proposer") == "random"
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['reports']}/", timeout=5) as page:
            assert page.status == 200
        assert _count_events(databases, "golden_config_created") >= 1
    finally:
        stopped = _stack(env, "stop", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert not list((run_dir / "stack").glob("*.pid"))
    for port in ports.values():
        assert _get_json(f"http://127.0.0.1:{port}/health") is None


@pytest.mark.long  # a whole stack started and stopped once more (make test-long)
def test_with_a_snakelab_of_its_own_the_stack_starts_no_reference_snakelab(databases, tmp_path):
    """With ``AX3L_SNAKELAB_ENDPOINT`` set (the user's own SnakeLab, here a reference SnakeLab
    started apart), stack.py starts the three Ax3l services and no SnakeLab: the loop's runs
    are the user's SnakeLab's, nothing listens on the reference SnakeLab's port, and stop
    leaves the user's SnakeLab running."""
    ports = {name: free_port() for name in ("reports", "orchestrator", "toolbroker", "snakelab")}
    env = _stack_env(databases, tmp_path, ports)
    theirs = SnakeLabProcess(databases.env()).start()
    env["AX3L_SNAKELAB_ENDPOINT"] = theirs.endpoint
    try:
        started = _stack(env, "start", timeout=180)
        assert started.returncode == 0, started.stdout + started.stderr
        wait_until(
            lambda: _count_events(databases, "configuration_compared") >= 2,
            timeout=120,
            interval=0.5,
            what="two compared steps",
        )
        status = _stack(env, "status", timeout=60)
        listed = [line.split()[0] for line in status.stdout.splitlines() if line.strip()]
        assert "snakelab" not in listed, status.stdout
        assert {"toolbroker", "orchestrator", "reports"} <= set(listed), status.stdout
        pids = {p.stem for p in (Path(env["AX3L_RUN_DIR"]) / "stack").glob("*.pid")}
        assert "snakelab" not in pids, pids
        assert not ping(f"tcp://127.0.0.1:{ports['snakelab']}", timeout=0.5)
        runs = databases.query("SELECT COUNT(*) FROM simulation_runs", user="snakelab")[0][0]
        assert runs >= 3  # seeding and two proposals, on their SnakeLab
    finally:
        stopped = _stack(env, "stop", timeout=120)
        try:
            assert stopped.returncode == 0, stopped.stderr
            assert ping(theirs.endpoint)  # theirs, not the stack's to stop
        finally:
            theirs.close()


def test_with_the_external_proposer_the_seats_endpoint_is_a_service_of_its_own(
    tmp_path, monkeypatch
):
    """AX3L_PROPOSER=external: make run's stack gets a ``seats`` service (``seat_process
    serve``, before the orchestrator) whose environment holds the seats' own login and the
    board socket in the run directory, never Ax3l's login nor anything else's secrets; the
    orchestrator and the report server hold no seats' login. Other proposers get no seats
    service, and the orchestrator that starts the endpoint as its child (no board socket) still
    gets the login it hands over."""
    import stack  # scripts/stack.py

    from ax3l.shared.env_files import setting_names
    from ax3l.shared.settings import Settings
    from ax3l.shared.stack import spec

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    where = {"DB_HOST": "127.0.0.1", "DB_PORT": "33306", "AX3L_DB_NAME": "ax3l"}
    secrets = {
        "DB_USER": "ax3l_rw",
        "DB_PASSWORD": "ax3l-secret",
        "AX3L_SEATS_DB_USER": "ax3l_seats",
        "AX3L_SEATS_DB_PASSWORD": "seats-secret",
        "AX3L_REPORTS_DB_USER": "ax3l_reports",
        "AX3L_REPORTS_DB_PASSWORD": "reports-secret",
        "AX3L_DB_ADMIN_PASSWORD": "admin-secret",
        "AX3L_NOTIFY_URLS": "json://notify-secret",
    }
    db_env = {**where, **secrets}
    (run_dir / "db.env").write_text("".join(f"{k}={v}\n" for k, v in db_env.items()))
    monkeypatch.setattr(stack, "RUN_DIR", run_dir)
    monkeypatch.setattr(stack, "BOARD_SOCKET", run_dir / "seats" / "board.sock")
    for key in list(os.environ):
        if key.startswith(("AX3L_", "DB_", "SNAKELAB_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AX3L_PROPOSER", "external")
    monkeypatch.setenv("AX3L_SEATS_PORT", "28999")
    env = stack.stack_env()
    board = str(run_dir / "seats" / "board.sock")
    assert env["AX3L_SEATS_BOARD_SOCKET"] == board

    found = {service.name: service for service in stack.stack_services(env)}
    assert list(found) == ["snakelab", "toolbroker", "seats", "orchestrator", "reports"]
    seats = found["seats"]
    assert seats.argv("/venv/python") == ["/venv/python", "-m", spec.SEATS_MODULE, "serve"]
    assert seats.marker() == spec.SEATS_MODULE
    assert seats.health_url == "http://127.0.0.1:28999/metrics"
    assert set(seats.env_keys) <= spec.with_files(setting_names(Settings))
    seats_env = seats.environment(env)
    assert seats_env["AX3L_SEATS_DB_USER"] == "ax3l_seats"
    assert seats_env["AX3L_SEATS_DB_PASSWORD"] == "seats-secret"
    assert seats_env["AX3L_SEATS_BOARD_SOCKET"] == board
    assert seats_env["AX3L_SEATS_PORT"] == "28999"
    assert where.items() <= seats_env.items()
    assert not {"DB_USER", "DB_PASSWORD", "AX3L_PROPOSER"} & set(seats_env)
    # Of the logins and secrets, its own only.
    assert set(seats_env.values()) & set(secrets.values()) == {"ax3l_seats", "seats-secret"}
    for name in ("orchestrator", "reports", "toolbroker"):
        other = found[name].environment(env)
        assert not {"AX3L_SEATS_DB_USER", "AX3L_SEATS_DB_PASSWORD"} & set(other), name
        assert "seats-secret" not in other.values(), name
    orchestrator = found["orchestrator"].environment(env)
    assert orchestrator["AX3L_SEATS_BOARD_SOCKET"] == board
    assert orchestrator["DB_PASSWORD"] == "ax3l-secret"
    assert "seats (MCP):  http://127.0.0.1:28999/mcp" in stack.urls(env)

    # A database set up by hand, without a seats' login: the endpoint falls back on Ax3l's.
    bare = {k: v for k, v in env.items() if not k.startswith("AX3L_SEATS_DB_")}
    assert spec.service("seats", bare).environment(bare)["DB_PASSWORD"] == "ax3l-secret"
    # Another proposer: no seats service, and nothing of the seats' for anyone.
    tpe = {**env, "AX3L_PROPOSER": "tpe"}
    assert "seats" not in [service.name for service in spec.services(tpe)]
    assert "seats-secret" not in spec.service("orchestrator", tpe).environment(tpe).values()
    # The endpoint as the orchestrator's child (no board socket): it hands the login over.
    child = {k: v for k, v in env.items() if k != "AX3L_SEATS_BOARD_SOCKET"}
    handed = spec.service("orchestrator", child).environment(child)
    assert handed["AX3L_SEATS_DB_PASSWORD"] == "seats-secret"


def _seats_login(databases) -> tuple[str, str]:
    """A seats' endpoint user for these databases, as scripts/mariadb.sh makes ``ax3l_seats``:
    created by the administrator with SELECT on SnakeLab's database; ``ax3l-db create`` (run by
    stack.py) gives it its tables as Ax3l's user, who holds its database WITH GRANT OPTION."""
    import secrets

    from ax3l.shared.db.cli import seats_grants

    user, password = f"seats_{secrets.token_hex(4)}", secrets.token_hex(12)
    settings = databases.settings(AX3L_SEATS_DB_USER=user, AX3L_SEATS_DB_PASSWORD=password)
    admin = databases.connect("admin")
    try:
        with admin.cursor() as cur:
            for statement in seats_grants(settings, user, password)[:2]:
                cur.execute(statement)
            cur.execute(
                f"GRANT ALL PRIVILEGES ON `{databases.ax3l_db}`.* TO"
                f" '{databases.ax3l_user}'@'%' WITH GRANT OPTION"
            )
    finally:
        admin.close()
    return user, password


def _drop_seats_login(databases, user: str) -> None:
    admin = databases.connect("admin")
    try:
        with admin.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
            cur.execute(
                f"REVOKE GRANT OPTION ON `{databases.ax3l_db}`.* FROM '{databases.ax3l_user}'@'%'"
            )
    finally:
        admin.close()


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def _seat_call(url: str, token: str, tool: str, arguments: dict) -> dict | None:
    """A seat's tools/call over plain HTTP; its structured result (None: no answer yet)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": tool, "arguments": arguments}
    request = urllib.request.Request(
        url,
        json.dumps(body).encode(),
        {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "authorization": f"Bearer {token}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            result = json.loads(reply.read())["result"]
    except (OSError, ValueError, KeyError):
        return None
    if result.get("structuredContent"):
        return dict(result["structuredContent"])
    return dict(json.loads(result["content"][0]["text"]))


def _take_a_turn(url: str, token: str) -> dict:
    """Wait for an open turn, answer it with a legal value; the accepted answer."""
    from ax3l.shared.config_schema import load_schema
    from ax3l.shared.registry import BY_NAME

    def open_turn() -> dict | None:
        turn = _seat_call(url, token, "current_turn", {})
        return turn if turn and turn.get("open") else None

    turn = wait_until(open_turn, timeout=90, interval=0.3, what="an open turn for the seats")
    choices = turn["open_values"]["choices"]
    if choices:
        values = dict(zip(turn["arguments"], choices[0], strict=True))
    else:
        schema, entry = load_schema(None), BY_NAME[turn["entry"]]
        values = {}
        for argument, path in zip(entry.value_names, entry.paths, strict=True):
            leaf = schema.by_path[path]
            assert leaf.minimum is not None and leaf.maximum is not None
            values[argument] = (float(leaf.minimum) + float(leaf.maximum)) / 2
    answer = _seat_call(url, token, turn["tool"], values)
    assert answer is not None and answer.get("status") == "ok", (turn, answer)
    return answer


@pytest.mark.long  # a whole stack started and stopped once more (make test-long)
def test_make_run_with_the_external_proposer_runs_the_seats_endpoint_apart(databases, tmp_path):
    """``AX3L_PROPOSER=external make start``: the seats' endpoint is a supervised service of its
    own, logged in as its own user (its process holds no Ax3l password, the orchestrator's no
    seats' password), sharing the turn board over a 0600 socket in the run directory; a seat
    takes a turn through it, and after the endpoint is killed the supervisor starts it again
    and a seat takes the next turn; stop ends it and removes the socket."""
    import signal
    import stat

    from ax3l.testing.databases import run_module

    ports = {name: free_port() for name in ("reports", "orchestrator", "toolbroker", "snakelab")}
    env = _stack_env(databases, tmp_path, ports)
    run_dir = Path(env["AX3L_RUN_DIR"])
    seats_port = free_port()
    user, password = _seats_login(databases)
    with (run_dir / "db.env").open("a") as db_env:
        db_env.write(f"AX3L_SEATS_DB_USER={user}\nAX3L_SEATS_DB_PASSWORD={password}\n")
    env |= {
        "AX3L_PROPOSER": "external",
        "AX3L_SEATS_PORT": str(seats_port),
        "AX3L_EXTERNAL_DEADLINE": "120",
        "AX3L_SEAT_TOKEN_REFRESH": "0.2",
    }
    url = f"http://127.0.0.1:{seats_port}/mcp"
    board = run_dir / "seats" / "board.sock"
    try:
        started = _stack(env, "start", timeout=180)
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"seats (MCP):  {url}" in started.stdout
        pids = {p.stem: int(p.read_text()) for p in (run_dir / "stack").glob("*.pid")}
        assert {"seats", "orchestrator"} <= set(pids), pids
        seats_env, orchestrator_env = _environ(pids["seats"]), _environ(pids["orchestrator"])
        assert seats_env["AX3L_SEATS_DB_USER"] == user
        assert not {"DB_USER", "DB_PASSWORD"} & set(seats_env)
        assert databases.ax3l_password not in seats_env.values()
        assert not {"AX3L_SEATS_DB_USER", "AX3L_SEATS_DB_PASSWORD"} & set(orchestrator_env)
        assert password not in orchestrator_env.values()
        assert seats_env["AX3L_SEATS_BOARD_SOCKET"] == str(board)
        assert orchestrator_env["AX3L_SEATS_BOARD_SOCKET"] == str(board)
        assert stat.S_IMODE(board.stat().st_mode) == 0o600
        assert stat.S_IMODE(board.parent.stat().st_mode) == 0o700
        logins = databases.query(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (user,)
        )
        assert logins[0][0] >= 1  # the endpoint's pool, as its own user

        added = run_module("ax3l.orchestrator.seats_cli", "add", "ivy", env=databases.env())
        assert added.returncode == 0, added.stderr
        token = added.stdout.strip().splitlines()[-1]
        first = _take_a_turn(url, token)
        assert first["run_id"]

        os.kill(pids["seats"], signal.SIGKILL)

        def restarted() -> int | None:
            pid_file = run_dir / "stack" / "seats.pid"
            pid = int(pid_file.read_text()) if pid_file.exists() else None
            return pid if pid not in (None, pids["seats"]) else None

        wait_until(restarted, timeout=60, interval=0.2, what="the seats' endpoint restarted")
        second = _take_a_turn(url, token)
        assert second["run_id"] != first["run_id"]
        accepted = databases.query(
            "SELECT COUNT(*) FROM events e JOIN event_messages m USING (event_id)"
            " WHERE e.name = 'seat_call' AND e.source_name = 'ivy'"
            " AND m.content LIKE '%%\"accepted\"%%'"
        )
        assert accepted[0][0] == 2
    finally:
        stopped = _stack(env, "stop", timeout=120)
        _drop_seats_login(databases, user)
    assert stopped.returncode == 0, stopped.stderr
    assert not list((run_dir / "stack").glob("*.pid"))
    assert not board.exists()
    assert _get_json(f"http://127.0.0.1:{seats_port}/metrics") is None
