"""The status bar's loop part: read from the orchestrator's status API in the background,
shown on the event log, and degrading to "unavailable since" without ever holding a page."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import closing
from typing import Any

import pytest
from reports_testing import OrchestratorStatusApi, StatusServer, app_client, reports_settings

from ax3l.orchestrator.status import LoopStatus, Phase
from ax3l.reports.rendering import ago
from ax3l.reports.settings import ReportsSettings
from ax3l.testing.plugin import free_port

NEW_FIELDS = {"failure_streak": 2, "fallback_proposer": "tpe", "llm_fallback_after": 3}


def orchestrator_json(**changes: Any) -> dict[str, Any]:
    """An orchestrator status answer as the orchestrator's LoopStatus.as_dict() builds it."""
    data = LoopStatus(process_id="p", proposer="llm").as_dict()
    data.update(phase="conversing", parameter="gamma", index=4, snakelab_runs=12)
    data.update(changes)
    return data


async def eventually(
    read: Callable[[], Awaitable[Any]], check: Callable[[Any], bool], within: float = 10
) -> Any:
    """Read until ``check`` holds, failing at the deadline (no fixed sleep)."""
    deadline = time.monotonic() + within
    while True:
        value = await read()
        if check(value):
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met; last value: {value}")
        await asyncio.sleep(0.05)


@pytest.fixture
def status_server() -> Iterator[StatusServer]:
    with closing(StatusServer(orchestrator_json(**NEW_FIELDS))) as server:
        yield server


def test_the_orchestrator_url_defaults_to_its_host_and_port():
    """Unset, the URL is built from AX3L_HTTP_HOST and AX3L_ORCHESTRATOR_PORT (wildcards as
    127.0.0.1); set, AX3L_ORCHESTRATOR_URL wins."""
    assert ReportsSettings().orchestrator_status_url() == "http://127.0.0.1:28871/api/status"
    wildcard = ReportsSettings(AX3L_HTTP_HOST="0.0.0.0", AX3L_ORCHESTRATOR_PORT=29999)
    assert wildcard.orchestrator_status_url() == "http://127.0.0.1:29999/api/status"
    chosen = ReportsSettings(AX3L_ORCHESTRATOR_URL="http://orchestrator:28871/")
    assert chosen.orchestrator_status_url() == "http://orchestrator:28871/api/status"


def test_ages_read_in_the_largest_fitting_unit():
    """Error ages read as seconds, minutes, hours or days."""
    assert [ago(12), ago(300), ago(7200), ago(3 * 86400)] == [
        "12 s ago",
        "5 min ago",
        "2 h ago",
        "3 days ago",
    ]


async def test_status_bar_shows_the_loop_from_the_real_status_api(experiment):
    """Phase, entry, proposer and the last error with its age come from the orchestrator's
    own status API (its app under uvicorn), as the loop changes them."""
    loop = LoopStatus(process_id="loop-1", proposer="llm")
    loop.set_phase(Phase.CONVERSING, parameter="hidden_size", index=0)
    with closing(OrchestratorStatusApi(experiment.dbs, loop)) as api:
        settings = reports_settings(experiment.dbs, AX3L_ORCHESTRATOR_URL=api.url)
        async with app_client(settings) as client:

            async def read() -> dict[str, Any]:
                return dict((await client.get("/api/status")).json()["orchestrator"])

            seen = await eventually(read, lambda o: o["state"] == "up")
            assert (seen["phase"], seen["parameter"], seen["index"]) == (
                "conversing",
                "hidden_size",
                0,
            )
            assert seen["proposer"] == "llm" and seen["last_error"] is None

            loop.error("hidden_size: model timeout: no reply within the timeout")
            loop.last_error_at = time.time() - 125
            loop.set_phase(Phase.BACKING_OFF, backoff_until=time.time() + 30)
            seen = await eventually(read, lambda o: o["phase"] == "backing off")
            assert seen["last_error"].startswith("hidden_size: model timeout")
            assert 120 <= seen["last_error_seconds_ago"] < 200
            page = (await client.get("/events")).text
            assert 'id="loop-state"' in page and "Backing off" in page
            assert "hidden_size (entry 1) · llm" in page and "retry at" in page
            assert 'id="last-error"' in page and "2 min ago · " in page


async def test_streak_and_fallback_are_shown_when_the_orchestrator_sends_them(
    experiment, status_server
):
    """The model's failure streak, the threshold and the fallback proposer reach the API and
    the page; at the threshold the page says the fallback is taking the turn."""
    settings = reports_settings(experiment.dbs, AX3L_ORCHESTRATOR_URL=status_server.url)
    async with app_client(settings) as client:
        loop = (await client.get("/api/status")).json()["orchestrator"]
        assert loop["state"] == "up"
        assert (loop["failure_streak"], loop["fallback_proposer"], loop["llm_fallback_after"]) == (
            2,
            "tpe",
            3,
        )
        page = (await client.get("/events")).text
        assert 'id="failure-streak"' in page and "tpe takes over at 3" in page

        status_server.status = orchestrator_json(**{**NEW_FIELDS, "failure_streak": 3})

        async def read_page() -> str:
            return (await client.get("/events")).text

        page = await eventually(read_page, lambda text: "tpe is taking this turn" in text)
        assert "loop-fallback" in page


async def test_an_older_orchestrator_without_the_new_fields_still_shows(experiment, status_server):
    """Without failure_streak and the fallback fields the bar shows phase and entry only."""
    status_server.status = {"phase": "waiting", "parameter": "gamma", "index": "odd", "x": [1]}
    settings = reports_settings(experiment.dbs, AX3L_ORCHESTRATOR_URL=status_server.url)
    async with app_client(settings) as client:
        loop = (await client.get("/api/status")).json()["orchestrator"]
        assert (loop["state"], loop["label"], loop["parameter"]) == ("up", "Waiting", "gamma")
        assert loop["failure_streak"] is None and loop["index"] is None
        page = (await client.get("/events")).text
        assert 'id="failure-streak"' not in page and 'id="last-error"' not in page


async def test_a_stopped_orchestrator_shows_unavailable_since_and_recovers(experiment):
    """Nothing listening: the bar says "orchestrator unavailable since" the first failed poll,
    keeps that time while the outage lasts, and shows the loop again once it answers."""
    port = free_port()
    settings = reports_settings(experiment.dbs, AX3L_ORCHESTRATOR_URL=f"http://127.0.0.1:{port}")
    async with app_client(settings) as client:

        async def read() -> dict[str, Any]:
            return dict((await client.get("/api/status")).json()["orchestrator"])

        first = await eventually(read, lambda o: o["state"] == "unavailable")
        assert first["label"] == "Unavailable" and first["unavailable_since"] is not None
        later = await eventually(read, lambda o: o["checked_at"] > first["checked_at"])
        assert later["unavailable_since"] == first["unavailable_since"]
        page = (await client.get("/events")).text
        assert "orchestrator unavailable since " in page and 'id="loop-unavailable"' in page


async def test_a_hung_orchestrator_never_holds_the_page(experiment, status_server):
    """An orchestrator that accepts but never answers costs the page nothing: the poll gives
    up at its timeout and the bar shows the orchestrator unavailable."""
    status_server.hang.set()
    settings = reports_settings(experiment.dbs, AX3L_ORCHESTRATOR_URL=status_server.url)
    async with app_client(settings) as client:
        started = time.monotonic()
        page = await client.get("/events")
        # The first page waits at most the status timeout (0.3 s) for the first poll.
        assert page.status_code == 200 and time.monotonic() - started < 3

        async def read() -> dict[str, Any]:
            return dict((await client.get("/api/status")).json()["orchestrator"])

        loop = await eventually(read, lambda o: o["state"] == "unavailable")
        assert loop["detail"] == "no answer within the timeout"


async def test_a_confirmation_and_the_snakelab_hosts_reach_the_status_bar(
    experiment, status_server
):
    """Under confirm with two hosts: the confirmation in progress (candidate, golden, seeds)
    and each host's state reach the API and the page, a hostile endpoint escaped; odd entries
    are dropped and an orchestrator without the fields shows neither card."""
    status_server.status = orchestrator_json(
        phase="confirming a promotion",
        promotion="confirm",
        confirmation={
            "candidate_run_id": "c" * 36,
            "golden_run_id": "g" * 36,
            "seeds": [1970, 1001971, True, "x"],
        },
        snakelab_hosts={"tcp://a:1": "running", "<b>x</b>": "down", "tcp://c:3": "exploded"},
    )
    settings = reports_settings(experiment.dbs, AX3L_ORCHESTRATOR_URL=status_server.url)
    async with app_client(settings) as client:
        loop = (await client.get("/api/status")).json()["orchestrator"]
        assert loop["promotion"] == "confirm"
        assert loop["confirmation"]["seeds"] == [1970, 1001971]
        assert loop["snakelab_hosts"] == {"tcp://a:1": "running", "<b>x</b>": "down"}
        page = (await client.get("/events")).text
        assert 'id="loop-confirmation"' in page and "on seeds 1970, 1001971" in page
        assert "tcp://a:1: running" in page and "&lt;b&gt;x&lt;/b&gt;: down" in page
        assert "<b>x</b>" not in page and "exploded" not in page

        status_server.status = orchestrator_json()
        page = await eventually(
            lambda: _page(client), lambda text: 'id="snakelab-hosts"' not in text
        )
        assert 'id="loop-confirmation"' not in page


async def _page(client: Any) -> str:
    return str((await client.get("/events")).text)


async def test_a_full_database_disk_reaches_the_status_bar_and_ready(experiment, status_server):
    """The orchestrator's disk_full: the bar's loop card reads "Disk full" with the message
    (escaped), /ready answers 503 with "disk: disk full since ..."; gone, both recover."""
    full = "disk full since 2026-01-01T00:00:00+00:00: <b>The table 'events' is full</b>"
    status_server.status = orchestrator_json(phase="backing off", disk_full=full)
    settings = reports_settings(experiment.dbs, AX3L_ORCHESTRATOR_URL=status_server.url)
    async with app_client(settings) as client:
        loop = (await client.get("/api/status")).json()["orchestrator"]
        assert (loop["label"], loop["disk_full"]) == ("Disk full", full)
        page = (await client.get("/events")).text
        assert 'id="loop-disk-full"' in page and "<b>The table" not in page
        assert "&lt;b&gt;The table &#39;events&#39; is full" in page
        ready = await client.get("/ready")
        assert ready.status_code == 503
        assert ready.json()["checks"] == {"database": True, "disk": False}
        assert ready.json()["problems"] == [f"disk: {full}"]

        status_server.status = orchestrator_json(phase="waiting")

        async def read() -> Any:
            return await client.get("/ready")

        await eventually(read, lambda r: r.status_code == 200)
        assert 'id="loop-disk-full"' not in (await client.get("/events")).text


async def test_every_card_names_the_same_entry_when_the_poll_lags_the_database(
    experiment, status_server
):
    """The orchestrator's polled entry can lag the last checkpoint by a poll: the orchestrator
    card, the cycles card and the dashboard's turn then all name the orchestrator's (its phase
    is of that entry), never one each."""
    from ax3l.shared.registry import PARAMETER_ORDER

    async with app_client(reports_settings(experiment.dbs)) as client:
        stored = (await client.get("/api/status")).json()["current_parameter"]
    polled = next(name for name in PARAMETER_ORDER if name != stored)
    status_server.status = orchestrator_json(parameter=polled, index=PARAMETER_ORDER.index(polled))
    settings = reports_settings(experiment.dbs, AX3L_ORCHESTRATOR_URL=status_server.url)
    async with app_client(settings) as client:
        status = await eventually(
            lambda: client.get("/api/status"),
            lambda r: r.json()["orchestrator"]["state"] == "up",
        )
        assert status.json()["turn"] == polled
        assert status.json()["current_parameter"] == stored
        for path in ("/", "/events"):
            page = (await client.get(path)).text
            cards = page[page.index('id="status-bar"') :].split("</section>")[0]
            assert f"now {polled}" in cards and f"now {stored}" not in cards
            assert f">{polled} (entry {PARAMETER_ORDER.index(polled) + 1})" in cards
        dashboard = (await client.get("/")).text
        assert f'<p id="dash-turn"><strong>{polled}</strong>' in dashboard
