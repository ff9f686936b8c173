"""The exported study opened in optuna-dashboard (the optional extra ``ax3l-shared[dashboard]``)
in Debian's headless Chromium: the trials page names the study's trial count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db.cli import connect
from ax3l.shared.db.export_optuna import export_optuna
from ax3l.shared.ports import free_port
from ax3l.shared.waiting import wait_until
from ax3l.testing.databases import TestDatabases
from ax3l.testing.snakelab_rows import insert_runs

CHROMIUM = Path("/usr/bin/chromium")
DASHBOARD = Path(sys.executable).parent / "optuna-dashboard"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is needed"),
    pytest.mark.skipif(
        not DASHBOARD.exists(),
        reason="optuna-dashboard: `uv sync --all-packages --extra dashboard`",
    ),
]


def _answers(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_optuna_dashboard_shows_the_exported_trials(
    snakelab_tables: TestDatabases, tmp_path: Path
) -> None:
    """Five finished runs and one still queued: the dashboard's trials page says 5 Trials."""
    from playwright.sync_api import sync_playwright

    dbs, schema = snakelab_tables, cached_schema()
    config = schema.default_config()
    configs = [schema.with_values(config, {"training.gamma": 0.9 + i / 100}) for i in range(6)]
    runs = insert_runs(dbs, schema, *configs, database=dbs.snakelab_db, status="queued")
    for number, run_id in enumerate(runs[:5]):
        dbs.query(
            "UPDATE simulation_runs SET status = %s, high_score = %s WHERE run_id = %s",
            ("failed" if number == 4 else "completed", 30 + number, run_id),
            user="snakelab",
        )
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    export_optuna(dbs.settings(), storage, "ax3l-dashboard", connect)

    port = free_port()
    dashboard = subprocess.Popen(
        [str(DASHBOARD), storage, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{base}/api/studies"), 30, "optuna-dashboard")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
            try:
                page = browser.new_page()
                page.goto(f"{base}/dashboard/studies/1/trials")
                page.get_by_text("5 Trials").wait_for(timeout=20000)
                assert "ax3l-dashboard" in page.inner_text("body")
            finally:
                browser.close()
    finally:
        dashboard.terminate()
        dashboard.wait(10)
