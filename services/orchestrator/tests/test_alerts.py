"""Alerts through apprise to a local webhook receiver on 127.0.0.1: each alert once, logged as
an event, never repeated by a restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ax3l.orchestrator.alerts import AlertWatcher, burst_alert, golden_alert
from ax3l.shared.alerts import Alert, Alerts, Notifier, NotifyUrlsInvalid, send_once_blocking
from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.event_models import GoldenConfigCreated, GoldenConfigSeedIncremented
from ax3l.testing.databases import TestDatabases
from ax3l.testing.snakelab_rows import insert_runs
from ax3l.testing.webhook import Receiver, webhook_receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as made:
        yield made


def _alert_events(databases: TestDatabases) -> list[tuple[str, str]]:
    rows = databases.query(
        "SELECT e.name, m.content FROM events e JOIN event_messages m"
        " ON m.event_id = e.event_id WHERE e.category = 'Alert' ORDER BY e.event_id"
    )
    return [(str(name), json.loads(content)["key"]) for name, content in rows]


async def test_an_alert_is_sent_once_across_restarts_and_a_failed_send_is_logged(
    databases: TestDatabases, receiver: Receiver
) -> None:
    """The same key goes out once, also through a new sender (a restart); a service that
    refuses it leaves an ``alert_failed`` under the claim and is not tried again."""
    alert = Alert("golden:1", "new_golden", "Ax3l: new golden", "run r1")
    async with Database(databases.settings()) as db:
        assert await Alerts(db, EventLog(db), Notifier(receiver.url)).send_once(alert)
        assert not await Alerts(db, EventLog(db), Notifier(receiver.url)).send_once(alert)
        receiver.status = 500
        failing = Alert("stall:r9", "stall", "Ax3l: stalled", "nothing completes")
        assert await Alerts(db, EventLog(db), Notifier(receiver.url)).send_once(failing)
        assert not await Alerts(db, EventLog(db), Notifier(receiver.url)).send_once(failing)
    assert receiver.titles() == ["Ax3l: new golden", "Ax3l: stalled"]
    assert receiver.posts[0]["message"] == "run r1"
    assert _alert_events(databases) == [
        ("alert_sent", "golden:1"),
        ("alert_sent", "stall:r9"),
        ("alert_failed", "stall:r9"),
    ]
    with pytest.raises(NotifyUrlsInvalid) as refused:
        Notifier("nosuchservice://token-123@x")
    assert "token-123" not in str(refused.value)


def _golden(kind: str, score: int, **extra: Any) -> GoldenConfigCreated:
    return GoldenConfigCreated(
        run_id=f"run-{score}",
        config={},
        high_score=score,
        seed=1970,
        simulations=1,
        reason=f"High score: {score}",
        kind=kind,
        **extra,
    )


async def test_the_watcher_alerts_on_goldens_rotations_and_a_stall_once(
    snakelab_tables: TestDatabases, receiver: Receiver
) -> None:
    """Goldens before alerts were on raise none; a new golden and a seed rotation in one look
    are one message (a rotation's baseline golden none), sent once the burst is over, with the
    most urgent severity and a link to its page; a restarted watcher repeats nothing; three
    goldens in a burst are one message; a stall (no completion for 3 median run times, and for a
    minute at least) raises one warning, never while the loop waits for a proposal nor counting
    that wait; the loop's stop one failure per process."""
    dbs = snakelab_tables
    schema = cached_schema()
    reports = "http://ax3l.example:28870"
    async with Database(dbs.settings()) as db:
        log = EventLog(db)
        await log.log(_golden("seeding", 40))
        waiting = {"now": False}

        def watcher(process_id: str = "p1") -> AlertWatcher:
            return AlertWatcher(
                Alerts(db, log, Notifier(receiver.url), reports),
                db,
                process_id,
                1,
                3.0,
                waiting=lambda: waiting["now"],
            )

        first = watcher()
        await first.poll()
        assert receiver.posts == []
        promoted = await log.log(_golden("promotion", 44, previous_high_score=40, proposer="tpe"))
        await log.log(GoldenConfigSeedIncremented(seed=1971, previous_seed=1970))
        await log.log(_golden("seed_rotation", 38))
        await first.poll()  # the events are seconds old: a burst may go on
        assert receiver.posts == []
        await first.poll()
        assert receiver.titles() == [
            "Ax3l: new golden configuration, high score 44 (was 40); seed rotated to 1971"
        ]
        post = receiver.posts[0]
        assert post["type"] == "success"
        assert "proposed by tpe" in post["message"] and "runs again on seed 1971" in post["message"]
        assert post["message"].endswith(f"\n{reports}/experiment-highscores")

        restarted = watcher("p2")
        await restarted.poll()
        assert len(receiver.posts) == 1

        for score in (45, 46, 47):
            await log.log(_golden("promotion", score, previous_high_score=score - 1))
        await restarted.poll()
        await restarted.poll()
        assert receiver.titles()[1:] == [
            "Ax3l: 3 new golden configurations, high score 47 (was 44)"
        ]
        assert receiver.posts[1]["message"].endswith(f"\n{reports}/golden-configurations")

        # Three runs of 10 s each, the last completed 100 s ago: a stall (3 x 10 s)...
        runs = insert_runs(dbs, schema, *[schema.default_config()] * 3, database=dbs.snakelab_db)
        dbs.query(
            "UPDATE simulation_runs SET started_at = UTC_TIMESTAMP(6) - INTERVAL 110 SECOND,"
            " completed_at = UTC_TIMESTAMP(6) - INTERVAL 100 SECOND",
            user="snakelab",
        )
        restarted.started -= 200  # the process has been up longer than the stall
        restarted.waited_until -= 200
        # ... but not while a turn waits for a seat, nor right after it was answered.
        waiting["now"] = True
        await restarted.poll()
        waiting["now"] = False
        await restarted.poll()
        assert len(receiver.posts) == 2
        # Runs of a tenth of a second, nothing completed for 30 s: 300 median run times, but
        # shorter than the minute every stall lasts at least (the loop's own work between runs).
        dbs.query(
            "UPDATE simulation_runs SET started_at = completed_at - INTERVAL 100000 MICROSECOND",
            user="snakelab",
        )
        restarted.waited_until -= 30
        await restarted.poll()
        await restarted.poll()
        assert len(receiver.posts) == 2
        dbs.query(
            "UPDATE simulation_runs SET started_at = completed_at - INTERVAL 10 SECOND",
            user="snakelab",
        )
        restarted.waited_until -= 30  # the wait ended a minute ago: 60 s > 3 x 10 s
        await restarted.poll()
        await restarted.poll()
        assert receiver.titles()[2:] == ["Ax3l: no run has completed for 60 s"]
        stall = receiver.posts[2]
        assert stall["type"] == "warning" and stall["message"].endswith(f"\n{reports}/")
        assert runs[-1] in stall["message"] or runs[0] in stall["message"]

        await restarted.loop_stopped("ParameterOrderChanged: reset experiment events")
        await restarted.loop_stopped("again")
        assert receiver.titles()[3:] == ["Ax3l: the experiment loop stopped"]
        assert receiver.posts[3]["type"] == "failure"
        assert receiver.posts[3]["message"] == (
            f"ParameterOrderChanged: reset experiment events\n{reports}/events"
        )
    kinds = [key.split(":")[0] for name, key in _alert_events(dbs)]
    assert kinds == ["burst", "burst", "stall", "loop_stopped"]
    levels = dbs.query(
        "SELECT JSON_VALUE(m.content, '$.severity'), JSON_VALUE(m.content, '$.link'), e.log_level"
        " FROM events e JOIN event_messages m ON m.event_id = e.event_id"
        " WHERE e.name = 'alert_sent' ORDER BY e.event_id"
    )
    assert [tuple(row) for row in levels] == [
        ("success", f"{reports}/experiment-highscores", "INFO"),
        ("success", f"{reports}/golden-configurations", "INFO"),
        ("warning", f"{reports}/", "WARNING"),
        ("failure", f"{reports}/events", "WARNING"),
    ]
    assert promoted > 0


def test_a_single_golden_links_to_its_run_and_a_bad_alert_is_refused() -> None:
    """A lone new golden is its own alert (success, its run's page); an alert with an unknown
    severity or a link that is no path is refused when it is made."""
    content = _golden("promotion", 44, previous_high_score=40).stored()
    alone = burst_alert([golden_alert(7, content)])  # type: ignore[list-item]
    assert (alone.key, alone.severity, alone.link) == (
        "golden:7",
        "success",
        "/simulations/run-44",
    )
    with pytest.raises(ValueError, match="severity"):
        Alert("k", "stall", "t", "b", severity="urgent")
    with pytest.raises(ValueError, match="path"):
        Alert("k", "stall", "t", "b", link="http://elsewhere/")


def test_the_supervisors_alert_goes_out_without_a_database(receiver: Receiver) -> None:
    """``make run``'s supervisor gave up, maybe on MariaDB itself: the alert is still sent."""
    from ax3l.shared.settings import Settings

    settings = Settings(
        DB_HOST="127.0.0.1",
        DB_PORT=1,
        AX3L_NOTIFY_URLS=receiver.url,
        AX3L_DB_ACQUIRE_TIMEOUT=2,
    )
    alert = Alert("service_gave_up:1:t", "service_gave_up", "Ax3l: gave up", "mariadb crashed")
    assert send_once_blocking(settings, alert, unlogged_ok=True) is True
    assert receiver.titles() == ["Ax3l: gave up"]


def test_the_orchestrator_refuses_notification_urls_apprise_does_not_know(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed ``AX3L_NOTIFY_URLS`` stops ``ax3l-orchestrator`` at start (exit 2) with a
    message that does not repeat the URL's token."""
    from ax3l.orchestrator.main import main

    monkeypatch.setenv("AX3L_NOTIFY_URLS", "nosuchservice://secret-token-9@host")
    assert main(["--proposer", "random"]) == 2
    err = capsys.readouterr().err
    assert "AX3L_NOTIFY_URLS" in err and "secret-token-9" not in err


@pytest.mark.parametrize("contents", ["", "\n", "  \n"])
def test_empty_notification_urls_mean_no_alerts(
    contents: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty ``AX3L_NOTIFY_URLS`` (compose's empty ``notify_urls`` secret file, or the
    variable set to nothing) means no alerts, not a refusal; a file with a URL is read."""
    from ax3l.shared.alerts import notifier_from
    from ax3l.shared.settings import Settings

    for name in ("AX3L_NOTIFY_URLS", "AX3L_NOTIFY_URLS_FILE"):
        monkeypatch.delenv(name, raising=False)
    assert notifier_from(Settings(AX3L_NOTIFY_URLS=contents)) is None
    secret = tmp_path / "notify_urls"
    secret.write_text(contents)
    monkeypatch.setenv("AX3L_NOTIFY_URLS_FILE", str(secret))
    assert notifier_from(Settings()) is None
    alert = Alert("golden:1", "new_golden", "Ax3l: new golden", "run r1")
    assert send_once_blocking(Settings(), alert) is None
    secret.write_text("json://127.0.0.1:9/hook\n")
    notifier = notifier_from(Settings())
    assert notifier is not None and notifier.services == 1
