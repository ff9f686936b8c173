"""The Docker deployment, checked without a Docker engine.

``docker-compose`` (the Python implementation from Debian's package) parses, merges and
validates the files against its Compose Specification schema without talking to an engine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import stack  # scripts/stack.py (pyproject's pytest pythonpath)
import yaml

from ax3l.testing.plugin import free_port, wait_until

REPO = Path(__file__).resolve().parent.parent

# Passwords are compose secrets (files); the llama file needs its model's name.
SECRETS = {"AX3L_SECRETS_DIR": "/run/ax3l-test-secrets", "AX3L_LLAMA_MODEL": "model.gguf"}
SECRET_ENDINGS = ("PASSWORD", "PWD", "API_KEY", "SECRET", "_TOKEN")
PASSWORD_NAMES = {
    "mysql_root_password",
    "ax3l_db_password",
    "snakelab_db_password",
    "reports_db_password",
    "seats_db_password",
}
# The alerts' apprise URLs hold tokens too: a secret file, empty for no alerts.
SECRET_NAMES = PASSWORD_NAMES | {"notify_urls"}
COMBINATIONS = {
    "host": ["compose.yaml"],
    "llama": ["compose.yaml", "compose.llama.yaml"],
    "demo": ["compose.yaml", "compose.demo.yaml"],
}
ONE_OFF = {"ax3l-db"}
SERVICE_DIRS = ["toolbroker", "orchestrator", "reports", "snakelab", "mcp-snakelab"]
WORKSPACE_MEMBERS = [
    "ax3l-shared",
    "ax3l-toolbroker",
    "ax3l-orchestrator",
    "ax3l-reports",
    "ax3l-snakelab-ref",
    "ax3l-mcp-snakelab",
]


def compose_config(files: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail(
            "docker-compose is not installed (apt-get install docker-compose; .ci/run does)"
        )
    args = [binary]
    for name in files:
        args += ["-f", str(REPO / name)]
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("AX3L_", "MYSQL_", "SNAKELAB_"))
    }
    return subprocess.run(
        [*args, "config"], env={**clean, **env}, capture_output=True, text=True, cwd=REPO
    )


@pytest.fixture(scope="module", params=list(COMBINATIONS))
def merged(request: pytest.FixtureRequest) -> dict:
    result = compose_config(COMBINATIONS[request.param], SECRETS)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_merged_files_are_valid_and_every_long_running_service_has_a_healthcheck(merged):
    """Each combination validates, and every service but one-off jobs has a healthcheck."""
    for name, service in merged["services"].items():
        if name in ONE_OFF:
            assert service.get("restart") == "no"
            continue
        check = service.get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), name


def test_every_dependency_waits_on_health_or_completion(merged):
    """No service starts merely after another has started."""
    for name, service in merged["services"].items():
        for dependency, rule in service.get("depends_on", {}).items():
            expected = (
                "service_completed_successfully" if dependency in ONE_OFF else "service_healthy"
            )
            assert rule["condition"] == expected, (name, dependency)


def test_only_the_reports_port_is_published(merged):
    """The tool endpoint, the database and the model stay off the host's ports."""
    published = {
        name: service["ports"]
        for name, service in merged["services"].items()
        if service.get("ports")
    }
    assert sorted(published) == ["reports", "seats"]
    assert [
        port["target"] if isinstance(port, dict) else port for port in published["reports"]
    ] in ([28870], ["127.0.0.1:28870:28870/tcp"], ["127.0.0.1:28870:28870"])
    # The seats' endpoint (profile seats) on loopback unless AX3L_SEATS_PUBLISH says otherwise.
    assert [port["target"] if isinstance(port, dict) else port for port in published["seats"]] in (
        [28873],
        ["127.0.0.1:28873:28873/tcp"],
        ["127.0.0.1:28873:28873"],
    )


def test_passwords_are_secret_files_never_environment_values(merged):
    """No compose variable or environment value holds a password: each service reads its own
    from /run/secrets/<name> through a *_FILE variable, and mounts only the secrets it names
    there; the secrets are files in AX3L_SECRETS_DIR."""
    for name in ("compose.yaml", "compose.demo.yaml", "compose.llama.yaml"):
        text = (REPO / name).read_text()
        found = [v for v in re.findall(r"\$\{([A-Z0-9_]+)", text) if v.endswith(SECRET_ENDINGS)]
        assert not found, (name, found)
    assert {name: secret["file"] for name, secret in merged["secrets"].items()} == {
        name: f"{SECRETS['AX3L_SECRETS_DIR']}/{name}" for name in SECRET_NAMES
    }
    for service_name, service in merged["services"].items():
        environment = service.get("environment", {})
        mounted = {secret["source"] for secret in service.get("secrets", [])}
        named = set()
        for key, value in environment.items():
            assert not key.endswith(SECRET_ENDINGS), (service_name, key)
            if key.endswith("_FILE"):
                assert value.startswith("/run/secrets/"), (service_name, key, value)
                named.add(value.removeprefix("/run/secrets/"))
        assert named == mounted, (service_name, named, mounted)


def test_only_the_orchestrator_gets_the_notification_urls_and_only_as_a_file(merged):
    """AX3L_NOTIFY_URLS holds tokens: the orchestrator reads it from the notify_urls secret
    file; no service has the value in its environment, no compose file interpolates it, and
    no other service mounts the file."""
    for name in ("compose.yaml", "compose.demo.yaml", "compose.llama.yaml"):
        assert "AX3L_NOTIFY_URLS}" not in (REPO / name).read_text(), name
        assert "${AX3L_NOTIFY_URLS" not in (REPO / name).read_text(), name
    for service_name, service in merged["services"].items():
        environment = service.get("environment", {})
        mounted = {secret["source"] for secret in service.get("secrets", [])}
        assert "AX3L_NOTIFY_URLS" not in environment, service_name
        if service_name == "orchestrator":
            assert environment["AX3L_NOTIFY_URLS_FILE"] == "/run/secrets/notify_urls"
            assert "notify_urls" in mounted
        else:
            assert "AX3L_NOTIFY_URLS_FILE" not in environment, service_name
            assert "notify_urls" not in mounted, service_name


def test_every_container_is_hardened(merged):
    """Read-only root filesystem with a tmpfs /tmp, no capabilities, no-new-privileges, memory
    and process limits: in every service of every combination."""
    for name, service in merged["services"].items():
        assert service.get("read_only") is True, name
        assert service.get("cap_drop") == ["ALL"] and not service.get("cap_add"), name
        assert "no-new-privileges:true" in service.get("security_opt", []), name
        assert any(mount.startswith("/tmp:") for mount in service.get("tmpfs", [])), name
        assert int(service.get("pids_limit", 0)) > 0 and service.get("mem_limit"), name
        assert not service.get("privileged"), name


def test_every_container_logs_to_rotated_files(merged):
    """Each service's stdout goes to Docker's json files, size-bounded with a few kept (a
    months-long run never fills the disk with logs)."""
    for name, service in merged["services"].items():
        logging = service.get("logging", {})
        assert logging.get("driver") == "json-file", name
        options = logging.get("options", {})
        assert re.fullmatch(r"\d+[kmg]", str(options.get("max-size", ""))), name
        assert int(options.get("max-file", 0)) >= 2, name


def test_only_the_orchestrator_shares_the_tool_network_with_the_broker(merged):
    """The broker's tool channel is bound to its alias on the internal `tools` network, which
    only the orchestrator, the seats' endpoint (and the model server, a client of nothing)
    join; they connect there, and the broker's status API listens on loopback only."""
    assert merged["networks"]["tools"].get("internal") is True
    members = {name for name, s in merged["services"].items() if "tools" in s.get("networks", {})}
    assert members <= {"toolbroker", "orchestrator", "seats", "llama-server"}
    assert {"toolbroker", "orchestrator", "seats"} <= members
    broker = merged["services"]["toolbroker"]
    assert broker["networks"]["tools"]["aliases"] == ["toolbroker-tools"]
    assert broker["environment"]["AX3L_ZMQ_ENDPOINT"] == "tcp://toolbroker-tools:61970"
    assert broker["environment"]["AX3L_HTTP_HOST"] == "127.0.0.1"
    orchestrator = merged["services"]["orchestrator"]["environment"]
    assert orchestrator["AX3L_ZMQ_ENDPOINT"] == "tcp://toolbroker-tools:61970"
    if "llama-server" in merged["services"]:
        assert set(merged["services"]["llama-server"]["networks"]) == {"tools"}


def test_the_init_sql_escapes_its_values():
    """A quote or backslash in a password or the reports user stays inside its SQL string."""
    users = REPO / "deploy" / "mysql-init" / "ax3l-users.bash"
    done = subprocess.run(
        ["bash", "-c", f'. "{users}"; ax3l_users_sql "$@"', "sh",
         "r'u", "a'b\\c", "x", "'; DROP DATABASE ax3l; --"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert "CREATE USER IF NOT EXISTS 'ax3l'@'%' IDENTIFIED BY 'a''b\\\\c';" in lines
    injected = "CREATE USER IF NOT EXISTS 'r''u'@'%' IDENTIFIED BY '''; DROP DATABASE ax3l; --';"
    assert injected in lines
    assert "GRANT SELECT ON ax3l.* TO 'r''u'@'%';" in lines
    assert not any(line.startswith("DROP") for line in lines)


def test_compose_commands_and_environment_agree_with_make_run():
    """compose.yaml and scripts/stack.py start the same commands with the same settings (the
    seats' endpoint too: make run's with the proposer external, compose's profile seats)."""
    result = compose_config(COMBINATIONS["demo"], SECRETS)
    services = yaml.safe_load(result.stdout)["services"]
    external = {"AX3L_PROPOSER": "external", "AX3L_SEATS_DB_USER": "ax3l_seats"}
    external["AX3L_SEATS_BOARD_SOCKET"] = "/run/ax3l-board/board.sock"
    definitions = [*stack.services({}), *stack.services(external)]
    assert "seats" in [definition.name for definition in definitions]
    for definition in definitions:
        compose_service = services[definition.name]
        assert compose_service["command"][0] == definition.command[0], definition.name
        # A setting's <NAME>_FILE form is the same setting (compose's secrets).
        environment = compose_service.get("environment", {})
        compose_keys = {key.removesuffix("_FILE") for key in environment}
        assert compose_keys <= set(definition.env_keys), (definition.name, compose_keys)


def test_report_server_gets_only_its_read_only_login():
    """compose and make run give the report server its own login, not Ax3l's read-write one."""
    result = compose_config(COMBINATIONS["demo"], SECRETS)
    reports_service = yaml.safe_load(result.stdout)["services"]["reports"]
    environment = reports_service["environment"]
    assert environment["AX3L_REPORTS_DB_USER"] == "ax3l_reports"
    assert environment["AX3L_REPORTS_DB_PASSWORD_FILE"] == "/run/secrets/reports_db_password"
    assert [secret["source"] for secret in reports_service["secrets"]] == ["reports_db_password"]
    assert not {"DB_USER", "DB_PASSWORD", "DB_PASSWORD_FILE"} & set(environment)
    env = {"AX3L_REPORTS_DB_USER": "ax3l_reports", "AX3L_REPORTS_DB_PASSWORD": "r"}
    reports = next(service for service in stack.services(env) if service.name == "reports")
    passed = reports.environment({**env, "DB_USER": "ax3l", "DB_PASSWORD": "rw"})
    assert passed == env
    init = (REPO / "deploy" / "mysql-init" / "ax3l-users.bash").read_text()
    assert "GRANT SELECT ON ax3l.* TO ${reports}@'%';" in init
    assert "GRANT SELECT ON snakelab.* TO ${reports}@'%';" in init


def test_the_seats_endpoint_runs_apart_with_its_own_login(merged):
    """Compose's seats service (profile seats): the endpoint's own process, hardened, with its
    own database login from its secret (never Ax3l's user or password), on the tools network
    for the broker; it shares the turn board with the orchestrator over the unix socket on a
    volume only the two mount; the database's init creates its user and `ax3l-db create`
    grants it its tables."""
    services = merged["services"]
    seats, orchestrator = services["seats"], services["orchestrator"]
    assert seats["profiles"] == ["seats"]
    assert seats["command"] == ["python", "-m", "ax3l.orchestrator.seat_process", "serve"]
    assert seats["image"] == orchestrator["image"]  # one image, one uid for the socket
    environment = seats["environment"]
    assert environment["AX3L_SEATS_DB_USER"] == "ax3l_seats"
    assert environment["AX3L_SEATS_DB_PASSWORD_FILE"] == "/run/secrets/seats_db_password"
    assert not {"DB_USER", "DB_PASSWORD", "DB_PASSWORD_FILE"} & set(environment)
    assert [secret["source"] for secret in seats["secrets"]] == ["seats_db_password"]
    assert environment["AX3L_ZMQ_ENDPOINT"] == "tcp://toolbroker-tools:61970"
    assert set(seats["networks"]) == {"internal", "default", "tools"}
    board = environment["AX3L_SEATS_BOARD_SOCKET"]
    assert orchestrator["environment"]["AX3L_SEATS_BOARD_SOCKET"] == board
    folder = board.rsplit("/", 1)[0]

    def board_volumes(service: dict) -> list[str]:
        found = []
        for volume in service.get("volumes", []):
            if isinstance(volume, str):  # docker-compose 1.x: source:target[:mode]
                source, target, *_ = volume.split(":")
                volume = {"source": source, "target": target}
            if volume.get("target") == folder:
                found.append(volume["source"])
        return found

    assert board_volumes(seats) == board_volumes(orchestrator) == ["seats-board"]
    mounted = {name for name, s in services.items() if board_volumes(s)}
    assert mounted == {"seats", "orchestrator"}
    assert "seats_db_password" not in {s["source"] for s in orchestrator["secrets"]}
    mysql = services["mysql"]["environment"]
    assert mysql["AX3L_SEATS_DB_PASSWORD_FILE"] == "/run/secrets/seats_db_password"
    assert services["ax3l-db"]["environment"]["AX3L_SEATS_DB_USER"] == "ax3l_seats"
    assert f"install -d -o ax3l -g ax3l -m 0700 {folder}" in _dockerfile("orchestrator")
    assert services["seats"]["depends_on"]["ax3l-db"]["condition"] == (
        "service_completed_successfully"
    )


def _dockerfile(name: str) -> str:
    """The lines of the one Dockerfile that build service ``name``'s image: its target stage
    and the stages it builds on or copies from, in file order. A ``FROM`` naming one of those
    stages is left out, so every ``FROM`` left names a base image."""
    parts = re.split(r"^(?=FROM )", (REPO / "Dockerfile").read_text(), flags=re.M)
    stages = {part.split()[3]: part for part in parts if part.startswith("FROM ")}
    wanted, todo = set(), [name]
    while todo:
        stage = todo.pop()
        wanted.add(stage)
        used = re.findall(r"(?:^FROM |--from=)(\S+)", stages[stage], flags=re.M)
        todo += [s for s in used if s in stages and s not in wanted]
    local = re.compile(rf"^FROM (?:{'|'.join(map(re.escape, stages))}) .*\n", flags=re.M)
    return "".join(local.sub("", part) for stage, part in stages.items() if stage in wanted)


@pytest.mark.parametrize("name", SERVICE_DIRS)
def test_dockerfiles_follow_the_rules(name):
    """Pinned bases, no latest, lockfile install without cache, non-root, a healthcheck."""
    text = _dockerfile(name)
    for line in re.findall(r"^FROM\s+(\S+)", text, re.M):
        assert re.search(r":\d+(\.\d+)+", line) and "latest" not in line, line
    for line in re.findall(r"COPY --from=(\S+/\S+)", text):
        assert re.search(r":\d+(\.\d+)+", line) and "latest" not in line, line
    install = re.search(r"^RUN uv sync (.*)$", text, re.M)
    assert install and "--frozen" in install.group(1) and "--no-cache" in install.group(1)
    assert "--no-dev" in install.group(1)
    assert re.search(r"^USER (?!root)\S+", text, re.M)
    assert "HEALTHCHECK" in text and "CMD" in text


def _install_command(name: str) -> list[str]:
    found = re.search(r"^RUN (uv sync .*)$", _dockerfile(name), re.M)
    assert found is not None, name
    line = found.group(1)
    # The image build disables uv's cache; the test reuses it for PyPI's wheels so CI does not
    # download twice, but rebuilds the workspace's own packages as the image would.
    refresh = [arg for member in WORKSPACE_MEMBERS for arg in ("--refresh-package", member)]
    return [arg for arg in line.split() if arg != "--no-cache"] + refresh


def _entry_point(name: str) -> list[str]:
    import json

    found = re.search(r"^CMD (\[.*\])$", _dockerfile(name), re.M)
    assert found is not None, name
    return list(json.loads(found.group(1)))


@pytest.fixture(scope="module")
def image_venvs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Builds (once per module) each service's venv with its Dockerfile's install command."""
    built: dict[str, Path] = {}

    def build(name: str) -> Path:
        if name not in built:
            venv = tmp_path_factory.mktemp(f"image-{name}") / "venv"
            uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
            env = {
                **os.environ,
                "UV_PROJECT_ENVIRONMENT": str(venv),
                "UV_PYTHON_DOWNLOADS": "never",
            }
            env.pop("VIRTUAL_ENV", None)
            done = subprocess.run(
                [uv, *_install_command(name)[1:]], cwd=REPO, env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, done.stderr[-2000:]
            built[name] = venv
        return built[name]

    return build


@pytest.mark.parametrize("name", SERVICE_DIRS)
def test_runtime_environment_builds_like_the_dockerfile_and_loads(name, image_venvs, tmp_path):
    """The Dockerfile's install command builds a fresh venv whose entry point loads."""
    venv = image_venvs(name)
    entry = _entry_point(name)
    python = venv / "bin" / "python"
    if entry[0] == "python":
        module = entry[entry.index("-m") + 1]
        probe = f"import importlib; importlib.import_module({module!r})"
    else:
        probe = (
            "import importlib.metadata as m, sys;"
            f"eps = [e for e in m.entry_points(group='console_scripts') if e.name == {entry[0]!r}];"
            "assert eps, 'no console script'; eps[0].load()"
        )
        assert (venv / "bin" / entry[0]).exists()
    started = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, cwd=tmp_path
    )
    assert started.returncode == 0, started.stderr[-2000:]
    # Dev tools stay out of the runtime image.
    assert not (venv / "bin" / "pytest").exists()


def _healthcheck(name: str) -> list[str]:
    import json

    match = re.search(r"^HEALTHCHECK [^\n]*\\\n\s*CMD (\[[^\n]*\])$", _dockerfile(name), re.M)
    assert match, name
    return json.loads(match.group(1))


@pytest.mark.parametrize(
    ("name", "default_port", "port_variable"),
    [
        ("reports", 28870, "AX3L_REPORTS_PORT"),
        ("toolbroker", 28872, "AX3L_TOOLBROKER_PORT"),
        ("snakelab", 41970, None),
    ],
)
def test_image_entry_point_starts_and_passes_its_healthcheck(
    name, default_port, port_variable, image_venvs, databases, tmp_path
):
    """The Dockerfile's CMD, run from its venv, starts and its HEALTHCHECK command passes."""
    venv = image_venvs(name)
    port = free_port()
    command = [str(arg).replace(str(default_port), str(port)) for arg in _entry_point(name)]
    command[0] = str(venv / "bin" / command[0])
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        **databases.env(),
        "AX3L_HTTP_HOST": "127.0.0.1",
        "AX3L_ZMQ_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
        "AX3L_SNAKELAB_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
        "SNAKELAB_TRAINER": "surrogate",
        "SNAKELAB_EVENTS_PORT": "0",
        "SNAKELAB_HEALTH_ENDPOINT": f"tcp://127.0.0.1:{port}",
    }
    if port_variable:
        env[port_variable] = str(port)
    if name == "snakelab":
        command = [arg.replace("0.0.0.0", "127.0.0.1") for arg in command]
    check = [str(arg).replace(str(default_port), str(port)) for arg in _healthcheck(name)]
    check[0] = str(venv / "bin" / check[0])
    log = (tmp_path / "service.log").open("wb")
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        wait_until(
            lambda: (
                proc.poll() is not None
                or subprocess.run(check, env=env, capture_output=True, timeout=10).returncode == 0
            ),
            timeout=60,
            interval=0.3,
            what=f"{name} healthcheck",
        )
        assert proc.poll() is None, (tmp_path / "service.log").read_text()[-2000:]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_compose_secrets_script_writes_each_secret_once(tmp_path):
    """scripts/compose-secrets.sh writes the five passwords compose.yaml names, random and
    distinct, and an empty notify_urls (no alerts), in a 0700 folder; a second run keeps them
    (the volume was initialised with them; the URLs are the user's)."""
    folder = tmp_path / "secrets"
    script = str(REPO / "scripts" / "compose-secrets.sh")
    subprocess.run([script, str(folder)], check=True, capture_output=True)
    values = {path.name: path.read_text() for path in folder.iterdir()}
    assert set(values) == SECRET_NAMES
    passwords = [values[name] for name in PASSWORD_NAMES]
    assert all(re.fullmatch(r"[0-9a-f]{32}", value) for value in passwords)
    assert len(set(passwords)) == len(PASSWORD_NAMES)
    assert values["notify_urls"] == ""
    assert folder.stat().st_mode & 0o777 == 0o700
    (folder / "notify_urls").write_text("ntfy://ntfy.sh/my-topic\n")
    values["notify_urls"] = "ntfy://ntfy.sh/my-topic\n"
    subprocess.run([script, str(folder)], check=True, capture_output=True)
    assert {path.name: path.read_text() for path in folder.iterdir()} == values
