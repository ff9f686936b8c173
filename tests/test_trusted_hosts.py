"""The Host allow-list (``AX3L_ALLOWED_HOSTS``) of the report server and the orchestrator's and the
broker's status APIs, and settings given as ``<NAME>_FILE`` (compose secrets). No servers are
started: each app is called in-process, whose middleware answers before any route or resource."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError
from pydantic_settings import SettingsError

from ax3l.orchestrator.status_api import create_app as orchestrator_app
from ax3l.reports.app import create_app as reports_app
from ax3l.reports.settings import ReportsSettings
from ax3l.shared.settings import DEFAULT_ALLOWED_HOSTS, FileVariables, Settings
from ax3l.shared.trusted_hosts import host_patterns
from ax3l.toolbroker.api import create_app as broker_app

APPS = {
    "reports": lambda hosts: reports_app(ReportsSettings(AX3L_ALLOWED_HOSTS=hosts)),
    "orchestrator": lambda hosts: orchestrator_app(None, hosts),  # type: ignore[arg-type]
    "toolbroker": lambda hosts: broker_app(None, hosts),  # type: ignore[arg-type]
}


def status_for(app, host: str) -> tuple[int, str]:
    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            return await client.get("/openapi.json", headers={"Host": host})

    reply = asyncio.run(get())
    return reply.status_code, reply.text


@pytest.mark.parametrize("name", sorted(APPS))
def test_the_default_allow_list_answers_loopback_and_compose_names_only(name):
    """With the default, loopback names (port or not) and the compose services' names are
    answered; a rebinding attacker's name, or no usable Host, gets 400 before any route."""
    app = APPS[name](DEFAULT_ALLOWED_HOSTS)
    for host in ("127.0.0.1:28870", "localhost", "[::1]:28871", "orchestrator:28871", "reports"):
        assert status_for(app, host)[0] == 200, host
    for host in ("evil.example", "127.0.0.1.evil.example:28870", "localhost.", "[::2]", "a b"):
        assert status_for(app, host) == (400, "Invalid host header"), host


def test_a_configured_list_replaces_the_default():
    """AX3L_ALLOWED_HOSTS names the hosts: its subdomain pattern and names pass, loopback no
    longer does; ``*`` turns the check off."""
    app = APPS["reports"]("ax3l.example.org, *.lab.example.org")
    assert status_for(app, "ax3l.example.org:443")[0] == 200
    assert status_for(app, "reports.lab.example.org")[0] == 200
    assert status_for(app, "127.0.0.1")[0] == 400
    assert status_for(APPS["toolbroker"]("*"), "anything.example")[0] == 200


@pytest.mark.parametrize("bad", ["", " , ", "a*.example", "*example.org", "http://x", "x:80"])
def test_a_malformed_allow_list_is_refused_at_start(bad):
    """A pattern Starlette would misread is a settings error naming AX3L_ALLOWED_HOSTS."""
    with pytest.raises(ValueError, match=r"host|wildcard"):
        host_patterns(bad)
    with pytest.raises(ValidationError, match="AX3L_ALLOWED_HOSTS"):
        Settings(AX3L_ALLOWED_HOSTS=bad)


def test_a_setting_reads_its_file_variable(tmp_path: Path, monkeypatch):
    """``<NAME>_FILE`` gives any setting, secret or not, from a file (its trailing newline
    dropped); the plain variable wins when both are set; an unreadable file names itself."""
    secret = tmp_path / "db_password"
    secret.write_text("s3cr'et\\\n")
    (tmp_path / "port").write_text("3310\n")
    monkeypatch.setenv("DB_PASSWORD_FILE", str(secret))
    monkeypatch.setenv("DB_PORT_FILE", str(tmp_path / "port"))
    monkeypatch.delenv("DB_PASSWORD", raising=False)
    monkeypatch.delenv("DB_PORT", raising=False)
    settings = Settings()
    assert settings.db_password.get_secret_value() == "s3cr'et\\"
    assert settings.db_port == 3310
    monkeypatch.setenv("DB_PORT", "3311")
    assert Settings().db_port == 3311
    monkeypatch.setenv("AX3L_REPORTS_DB_PASSWORD_FILE", str(secret))
    monkeypatch.delenv("DB_PASSWORD_FILE")
    monkeypatch.delenv("AX3L_REPORTS_DB_PASSWORD", raising=False)
    assert ReportsSettings().db_password.get_secret_value() == "s3cr'et\\"
    monkeypatch.setenv("DB_HOST_FILE", str(tmp_path / "missing"))
    with pytest.raises(SettingsError, match=r"DB_HOST_FILE=.*missing"):
        Settings()


def test_file_variables_reads_only_what_it_is_given(tmp_path: Path):
    """The source on its own: a variable set directly is never replaced by its file."""
    (tmp_path / "v").write_text("from-file")
    env = {"DB_USER_FILE": str(tmp_path / "v"), "DB_HOST": "h", "DB_HOST_FILE": "/nonexistent"}
    assert FileVariables(Settings, env)() == {"DB_USER": "from-file"}


def test_the_reference_snakelab_reads_its_password_file(tmp_path: Path):
    """The reference SnakeLab (which imports nothing of Ax3l) reads SNAKELAB_DB_PASSWORD_FILE
    the same way; a missing file is a ValueError its server reports at start."""
    from snakelab.run_store import DbSettings

    (tmp_path / "pw").write_text("lab-secret\n")
    assert DbSettings.from_env({"SNAKELAB_DB_PASSWORD_FILE": str(tmp_path / "pw")}).password == (
        "lab-secret"
    )
    both = {"SNAKELAB_DB_PASSWORD": "plain", "SNAKELAB_DB_PASSWORD_FILE": str(tmp_path / "pw")}
    assert DbSettings.from_env(both).password == "plain"
    with pytest.raises(ValueError, match="SNAKELAB_DB_PASSWORD_FILE"):
        DbSettings.from_env({"SNAKELAB_DB_PASSWORD_FILE": str(tmp_path / "none")})


def test_make_run_passes_a_services_file_variables_and_only_its_own():
    """The stack's allow-lists take a setting's <NAME>_FILE form with the setting: the
    orchestrator gets DB_PASSWORD_FILE but never the report server's login file, and the report
    server with its own login configured gets no form of Ax3l's read-write password."""
    from ax3l.shared.stack.spec import service

    env = {
        "DB_PASSWORD_FILE": "/s/ax3l",
        "AX3L_REPORTS_DB_USER": "ax3l_reports",
        "AX3L_REPORTS_DB_PASSWORD_FILE": "/s/reports",
        "AX3L_DB_ADMIN_PASSWORD_FILE": "/s/admin",
    }
    orchestrator = service("orchestrator", env).environment(env)
    assert orchestrator["DB_PASSWORD_FILE"] == "/s/ax3l"
    assert "AX3L_REPORTS_DB_PASSWORD_FILE" not in orchestrator
    assert "AX3L_DB_ADMIN_PASSWORD_FILE" not in orchestrator
    reports = service("reports", env).environment(env)
    assert reports["AX3L_REPORTS_DB_PASSWORD_FILE"] == "/s/reports"
    assert "DB_PASSWORD_FILE" not in reports
