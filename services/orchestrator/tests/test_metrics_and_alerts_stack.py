"""``/metrics`` and alerts on the real stack: SnakeLab, the broker and an orchestrator as
processes, a webhook receiver on 127.0.0.1 as the notification service."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ax3l.testing.stack import Stack
from ax3l.testing.webhook import Receiver, webhook_receiver

# The whole stack and a clean stop: 15-25 s on a loaded machine (make test-long). The default
# suite has the alert tests (test_alerts.py) and /metrics in-process (shared/tests/test_metrics.py).
pytestmark = pytest.mark.long


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as made:
        yield made


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a service's ``/metrics``, by name and labels."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_count_what_the_database_says_and_alerts_reach_the_webhook(
    stack: Stack, receiver: Receiver
) -> None:
    """After two steps (seeding, a turn) the orchestrator's and broker's ``/metrics`` agree
    with the database (steps, runs by status, accepted proposals, the golden's score) and the
    receiver has the first golden's alert; SIGTERM sends the loop-stopped alert, once."""
    stack.start()
    # Runs of about 0 s make any pause a "stall" of 3 median run times: this test is about the
    # golden's alert, so stalls are pushed out of reach.
    alerts = {"AX3L_NOTIFY_URLS": receiver.url, "AX3L_ALERT_POLL_INTERVAL": "0.2"}
    proc = stack.orchestrator("random", env={**alerts, "AX3L_STALL_FACTOR": "1000000"})
    stack.wait_for(lambda: stack.count("configuration_compared"), 60, "a comparison", proc)
    stack.wait_for(lambda: receiver.posts, 30, "the first golden's alert", proc)

    before, first = stack.runs(), stack.status()
    orchestrator = scrape(stack.api_port)
    after, status = stack.runs(), stack.status()
    assert orchestrator[("ax3l_database_up", (("service", "orchestrator"),))] == 1
    assert orchestrator[("ax3l_loop_steps_total", ())] >= 2
    assert orchestrator[("ax3l_loop_step_seconds_count", ())] >= 2
    scores = {first["golden_high_score"], status["golden_high_score"]}
    assert orchestrator[("ax3l_golden_high_score", ())] in scores
    assert orchestrator[("ax3l_seed", ())] == status["seed"]
    by_status = {
        labels[0][1]: value
        for (name, labels), value in orchestrator.items()
        if name == "ax3l_snakelab_runs"
    }
    # Runs go on while the page is read: the scrape sits between two reads of the table.
    assert len(before) <= sum(by_status.values()) <= len(after)
    completed = [sum(1 for r in runs if r["status"] == "completed") for runs in (before, after)]
    assert completed[0] <= by_status["completed"] <= completed[1]
    assert by_status["failed"] == 0
    route = (("method", "GET"), ("route", "/api/status"), ("service", "orchestrator"))
    assert (
        orchestrator[("ax3l_http_request_seconds_count", (*route[:2], route[2], ("status", "200")))]
        >= 1
    )

    broker = scrape(stack.broker_port)
    accepted = broker[("ax3l_tool_requests_total", (("outcome", "accepted"),))]
    assert accepted >= 1 and accepted <= stack.count("proposal_accepted")
    assert broker[("ax3l_tool_request_seconds_count", ())] >= accepted
    assert broker[("ax3l_database_up", (("service", "toolbroker"),))] == 1

    assert receiver.titles()[0].startswith("Ax3l: first golden configuration, high score")
    assert proc.stop() == 0
    titles = receiver.titles()
    assert titles.count("Ax3l: the experiment loop stopped") == 1
    assert "stopped by a signal" in receiver.posts[titles.index(titles[-1])]["message"]
    sent = stack.events("alert_sent")
    assert len(sent) == len(receiver.posts)
    assert len({e.process_id for e in sent}) == len(sent)
