"""``ax3l status [--watch]``: the status cards, the last runs and the current conversation in a
terminal, read from the orchestrator's real status API and a real report server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from reports_history import expected_rows
from reports_testing import OrchestratorStatusApi, reports_server

from ax3l.orchestrator.status import LoopStatus, Phase

HOSTILE = "[red]boom[/red] \x1b[2J\x07 done"


def _ax3l(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ax3l.reports.terminal", *args],
        env={**os.environ, "COLUMNS": "220", "TERM": "dumb", **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_status_shows_the_cards_the_last_runs_and_the_conversation(experiment, tmp_path: Path):
    """Once and with --watch: the phase, turn, proposer, golden score and last error from the
    orchestrator; the ten newest runs (their ids and scores) from /api/runs; the events of the
    conversation under way from /api/events. A model's markup and terminal escapes in the last
    error are shown as inert text; a service that does not answer is a line, not a crash."""
    dbs = experiment.dbs
    (conversation,) = dbs.query(
        "SELECT process_id FROM events WHERE name = 'reply_received' ORDER BY event_id LIMIT 1"
    )[0]
    names = {
        row[0]
        for row in dbs.query("SELECT name FROM events WHERE process_id = %s", (conversation,))
    }
    newest = dbs.query(
        "SELECT run_id, high_score FROM simulation_runs ORDER BY id DESC LIMIT 10",
        user="snakelab",
    )
    loop = LoopStatus(process_id="loop-1", proposer="llm+tpe")
    loop.set_phase(
        Phase.CONVERSING,
        parameter="learning_rate",
        index=3,
        conversation_id=conversation,
        golden_high_score=47,
        golden_run_id="golden-run",
        seed=1971,
    )
    loop.error(HOSTILE)
    api = OrchestratorStatusApi(dbs, loop)
    try:
        with reports_server(dbs, tmp_path / "reports.log") as server:
            once = _ax3l("status", "--orchestrator", api.url, "--reports", server.url)
            watched = _ax3l(
                "status", "--watch", "--interval", "0.2", "--count", "2",
                "--orchestrator", api.url, "--reports", server.url,
            )  # fmt: skip
            # No flags: the same settings as make start's (the ports, the listen address).
            ports = {
                "AX3L_HTTP_HOST": "0.0.0.0",
                "AX3L_ORCHESTRATOR_PORT": str(urlsplit(api.url).port),
                "AX3L_REPORTS_PORT": str(urlsplit(server.url).port),
            }
            settled = _ax3l("status", env=ports)
            narrow = _ax3l("status", env={**ports, "COLUMNS": "120"})
            named = _ax3l("status", env={**ports, "AX3L_ORCHESTRATOR_URL": "http://127.0.0.1:9"})
    finally:
        api.close()
    assert "the orchestrator (http://127.0.0.1:9) does not answer" in named.stdout
    assert "the report server" not in named.stdout
    # Like Ray Tune's table: each run's difference from its golden of its time, what it tried
    # and, on a wide terminal, the nine values; a narrow one keeps what the run tried.
    wanted = {row["run_id"]: row for row in expected_rows(experiment)}
    for run_id, _ in newest:
        row = wanted[str(run_id)]
        for out in (once.stdout, watched.stdout, narrow.stdout):
            line = next(x for x in out.splitlines() if str(run_id)[:8] in x)
            if row["score_difference"] is not None:
                difference = row["score_difference"]
                assert f" {'+' if difference > 0 else ''}{difference} " in line, line
            if row["changes"]:
                assert row["changes"].split(":")[0][:12] in line, line
    header = next(x for x in once.stdout.splitlines() if " seed " in x and " score " in x)
    assert all(f" {name} " in header for name in ("Δ", "tried", "hidden", "lr", "gamma", "why"))
    narrow_header = next(x for x in narrow.stdout.splitlines() if " tried " in x)
    assert " hidden " not in narrow_header and " why " in narrow_header
    for done in (once, watched, settled):
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert "conversing" in out and "learning_rate (entry 3)" in out and "llm+tpe" in out
        assert "47 (run golden-run)" in out
        for run_id, score in newest:
            line = next(x for x in out.splitlines() if str(run_id)[:8] in x)
            assert score is None or str(score) in line, line
        assert f"conversation {conversation}" in out
        assert any(name in out for name in names), names
        assert "[red]boom[/red] ?[2J? done" in out  # literal, ESC and BEL neutralised
        assert "\x1b" not in out and "\x07" not in out

    gone = _ax3l(
        "status", "--orchestrator", "http://127.0.0.1:9", "--reports", "http://127.0.0.1:9"
    )
    assert gone.returncode == 0
    assert "the orchestrator (http://127.0.0.1:9) does not answer" in gone.stdout
    assert "the report server (http://127.0.0.1:9) does not answer" in gone.stdout
    refused = _ax3l("status", "--reports", "file:///etc/passwd")
    assert refused.returncode == 2 and "must be an http(s) URL" in refused.stderr
