"""The compose tier's harness: one compose project driven through the CLI, read through the
published report port and the database container, and crashed the way the kernel would."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ax3l.testing.plugin import free_port, wait_until

REPO = Path(__file__).resolve().parents[2]
ONE_OFF = {"ax3l-db"}


def compose_command() -> list[str]:
    """``docker compose`` (v2) when the client has it, else Debian's ``docker-compose``."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("neither docker compose nor docker-compose is installed")
    return [binary]


@dataclass
class Timings:
    """Figures the tier prints at the end (and writes to test-output/compose/timings.json)."""

    values: dict[str, float] = field(default_factory=dict)

    def __setitem__(self, key: str, seconds: float) -> None:
        self.values[key] = round(seconds, 1)


@dataclass
class Compose:
    """One compose project: the repository's files, generated secrets, a free report port."""

    project: str
    files: list[str]
    env: dict[str, str]
    output_dir: Path
    report_port: int
    # The compose secrets (name to value), written as files in the project's secrets folder.
    secrets: dict[str, str] = field(default_factory=dict)
    # The profiles started besides the services without one (compose.yaml's seats).
    profiles: list[str] = field(default_factory=list)

    @property
    def base(self) -> list[str]:
        args = [*compose_command(), "-p", self.project]
        for name in self.files:
            args += ["-f", str(REPO / name)]
        for profile in self.profiles:
            args += ["--profile", profile]
        return args

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*self.base, *args],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done

    @contextlib.contextmanager
    def up(self, timings: Timings, label: str, healthy_within: float) -> Iterator[Compose]:
        """``up -d`` and wait until every service is healthy (timed as ``label``); on the way
        out the logs are saved and the project is taken ``down -v``."""
        try:
            began = time.monotonic()
            self.run("up", "-d")
            wait_until(
                self.all_healthy, timeout=healthy_within, interval=1, what="every service healthy"
            )
            timings[label] = time.monotonic() - began
            yield self
        finally:
            self.save_logs()
            self.run("down", "-v", "--remove-orphans")

    def container(self, service: str) -> str:
        ids = self.run("ps", "-a", "-q", service).stdout.split()
        assert len(ids) == 1, (service, ids)
        return ids[0]

    def exec(self, service: str, *command: str) -> subprocess.CompletedProcess[str]:
        """``docker exec`` ``command`` in ``service``'s container (60 s at most), output as text."""
        return subprocess.run(
            ["docker", "exec", self.container(service), *command],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def inspect(self, service: str) -> dict[str, Any]:
        out = subprocess.run(
            ["docker", "inspect", self.container(service)], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)[0]

    def services(self) -> list[str]:
        """The project's services: those without a profile and those of its profiles (the
        Python docker-compose's ``config --services`` lists every profile's)."""
        import yaml

        found = yaml.safe_load(self.run("config").stdout)["services"]
        return [
            name
            for name, service in found.items()
            if not service.get("profiles") or set(service["profiles"]) & set(self.profiles)
        ]

    def all_healthy(self) -> bool:
        """Every long-running service healthy and every one-off job exited 0."""
        for service in self.services():
            state = self.inspect(service)["State"]
            if service in ONE_OFF:
                if state["Status"] != "exited":
                    return False
                assert state["ExitCode"] == 0, (service, self.logs(service))
            elif state.get("Health", {}).get("Status") != "healthy":
                return False
        return True

    def sql(self, query: str) -> list[list[str]]:
        """Rows of a query run as root inside the database container (no port is published);
        the client reads root's password from the secret file into its environment, so it is
        on no command line, here or in the container."""
        login = 'MYSQL_PWD="$(cat /run/secrets/mysql_root_password)" exec mariadb -uroot "$@"'
        out = subprocess.run(
            [
                "docker", "exec", self.container("mysql"), "sh", "-c", login, "sh",
                "--batch", "--skip-column-names", "-e", query,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return [line.split("\t") for line in out.stdout.splitlines()]

    def scalar(self, query: str) -> int:
        return int(self.sql(query)[0][0])

    def report(self, path: str) -> Any:
        """JSON from the report server through its published port, as a user's browser sees it."""
        url = f"http://127.0.0.1:{self.report_port}{path}"
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())

    def report_or_none(self, path: str) -> Any:
        try:
            return self.report(path)
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def logs(self, service: str = "") -> str:
        done = subprocess.run(
            [*self.base, "logs", "--no-color", *([service] if service else [])],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        return done.stdout[-4000:]

    def save_logs(self) -> None:
        """Every container's state and log, stopped ones included, to test-output/compose/."""
        ids = self.run("ps", "-a", "-q").stdout.split()
        parts = []
        for container in ids:
            state = subprocess.run(
                ["docker", "inspect", "--format",
                 "{{.Name}} {{.State.Status}} exit={{.State.ExitCode}}"
                 " restarts={{.RestartCount}} oom={{.State.OOMKilled}}", container],
                capture_output=True, text=True,
            )  # fmt: skip
            log = subprocess.run(
                ["docker", "logs", "--timestamps", container], capture_output=True, text=True
            )
            parts.append(f"== {state.stdout.strip()}\n{log.stdout}{log.stderr}")
        (self.output_dir / f"{self.project}.log").write_text("\n".join(parts))


SECRET_NAMES = ("mysql_root_password", "ax3l_db_password", "snakelab_db_password",
                "reports_db_password", "seats_db_password")  # fmt: skip
# Characters a careless init script or command line would break on (quotes, a backslash, a
# dollar, a backtick, a comment and a statement separator): every password carries them.
AWKWARD = "'\\\"$`#;x"


def write_secrets(folder: Path) -> dict[str, str]:
    """Fresh passwords as compose secret files: the folder 0700, the files 0644 (as
    scripts/compose-secrets.sh leaves them), each password with AWKWARD characters."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    values = {name: secrets.token_hex(12) + AWKWARD for name in SECRET_NAMES}
    for name, value in values.items():
        (folder / name).write_text(value + "\n")
        (folder / name).chmod(0o644)
    # The alerts' apprise URLs, empty (no alerts) as scripts/compose-secrets.sh leaves them.
    (folder / "notify_urls").write_text("")
    (folder / "notify_urls").chmod(0o644)
    return values


def make_compose(
    project: str,
    files: list[str],
    output_dir: Path,
    profiles: list[str] | None = None,
    **extra: str,
) -> Compose:
    """A project with fresh secret files (and ``profiles`` started); the caller's
    AX3L_/MYSQL_/SNAKELAB_ variables are dropped."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("AX3L_", "MYSQL_", "SNAKELAB_"))
    }
    port = free_port()
    folder = output_dir / f"{project}-secrets"
    values = write_secrets(folder)
    env = {
        **clean,
        "AX3L_SECRETS_DIR": str(folder),
        "AX3L_REPORTS_PUBLISH": f"127.0.0.1:{port}",
        # The classic builder: BuildKit would fetch its Dockerfile frontend from a registry.
        "DOCKER_BUILDKIT": "0",
        "COMPOSE_DOCKER_CLI_BUILD": "0",
        **extra,
    }
    return Compose(project, files, env, output_dir, port, values, list(profiles or []))


def step_count(compose: Compose) -> int:
    """Completed steps of the loop: comparisons of a finished run with the golden one."""
    return compose.scalar(
        "SELECT COUNT(*) FROM ax3l.events"
        " WHERE name IN ('configuration_compared', 'parameter_space_exhausted')"
    )


def check_no_duplicates(compose: Compose) -> dict[str, int]:
    """What a crash must never do, read from both databases: a run submitted twice, a
    configuration stored twice, a step compared twice. Returns the counts checked."""
    runs = compose.scalar("SELECT COUNT(*) FROM snakelab.simulation_runs")
    configs = compose.scalar("SELECT COUNT(DISTINCT config_hash) FROM snakelab.simulation_runs")
    never_trained = compose.scalar(
        "SELECT COUNT(*) FROM snakelab.simulation_runs"
        " WHERE status = 'failed' AND COALESCE(episode_count, 0) = 0"
    )
    assert runs - configs <= never_trained, (runs, configs, never_trained)
    submitted = compose.sql(
        "SELECT JSON_VALUE(m.content, '$.run_id'), COUNT(*) FROM ax3l.events e"
        " JOIN ax3l.event_messages m ON m.event_id = e.event_id"
        " WHERE e.name = 'simulation_submitted' GROUP BY 1 HAVING COUNT(*) > 1"
    )
    assert submitted == [], submitted
    compared = compose.sql(
        "SELECT JSON_VALUE(m.content, '$.latest_run_id'), COUNT(*) FROM ax3l.events e"
        " JOIN ax3l.event_messages m ON m.event_id = e.event_id"
        " WHERE e.name = 'configuration_compared' GROUP BY 1 HAVING COUNT(*) > 1"
    )
    assert compared == [], compared
    unknown = compose.sql(
        "SELECT r.run_id FROM snakelab.simulation_runs r WHERE NOT EXISTS (SELECT 1 FROM"
        " ax3l.events e JOIN ax3l.event_messages m ON m.event_id = e.event_id"
        " WHERE e.name = 'simulation_submitted' AND JSON_VALUE(m.content, '$.run_id') = r.run_id)"
    )
    assert unknown == [], f"runs in SnakeLab that Ax3l never logged: {unknown}"
    return {"runs": runs, "steps": step_count(compose)}


def crash(compose: Compose, service: str) -> int:
    """SIGKILL of the container's main process from the host, as the kernel's OOM killer or a
    segfault would end it. (``docker kill`` is a stop by the user to the engine: the restart
    policy leaves such a container stopped.) Returns the restart count before the crash."""
    state = compose.inspect(service)
    os.kill(int(state["State"]["Pid"]), 9)
    return int(state["RestartCount"])


def restarted_and_healthy(compose: Compose, service: str, restarts_before: int) -> bool:
    state = compose.inspect(service)
    return (
        int(state["RestartCount"]) > restarts_before
        and state["State"].get("Health", {}).get("Status") == "healthy"
    )
