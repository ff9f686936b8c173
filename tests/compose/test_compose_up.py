"""The demo deployment (``compose.yaml`` + ``compose.demo.yaml``) on a real Docker engine: built
with the project's Dockerfiles, started with generated secrets, healthy, advancing, crashed
and restarted by its restart policy, taken down and brought up again on the same volume."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compose_harness import (
    Compose,
    Timings,
    check_no_duplicates,
    crash,
    make_compose,
    restarted_and_healthy,
    step_count,
)

from ax3l.testing.plugin import wait_until

pytestmark = pytest.mark.timeout(1800)
FILES = ["compose.yaml", "compose.demo.yaml"]


def _golden_count(compose: Compose) -> int:
    return compose.scalar("SELECT COUNT(*) FROM ax3l.events WHERE name = 'golden_config_created'")


def _seedings(compose: Compose) -> int:
    """Seeding runs submitted: exactly one per experiment, however often it restarts (a new
    golden, in contrast, is simply a step that improved)."""
    return compose.scalar(
        "SELECT COUNT(*) FROM ax3l.events WHERE name = 'simulation_submitted'"
        " AND source_name = 'InitialSeeding'"
    )


@pytest.fixture(scope="module")
def demo(base_images: None, output_dir: Path, timings: Timings) -> Iterator[Compose]:
    """The demo stack, built and started once for the module; ``down -v`` at the end."""
    compose = make_compose("ax3l-compose-demo", FILES, output_dir, SNAKELAB_SURROGATE_SECONDS="2")
    compose.run("down", "-v", "--remove-orphans")
    began = time.monotonic()
    compose.run("build")
    timings["build (all project images)"] = time.monotonic() - began
    with compose.up(timings, "up to all healthy", healthy_within=300):
        yield compose


def test_every_service_is_healthy_and_only_the_report_port_is_published(demo: Compose):
    """Each long-running container passes its healthcheck, ax3l-db exited 0, and the only
    port on the host is the report server's, on 127.0.0.1."""
    assert demo.all_healthy()
    published = {}
    for service in demo.services():
        ports = demo.inspect(service)["HostConfig"]["PortBindings"] or {}
        if ports:
            published[service] = ports
    assert published == {
        "reports": {"28870/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(demo.report_port)}]}
    }
    assert demo.report("/ready") is not None


def test_the_experiment_seeds_and_advances(demo: Compose):
    """Through the published report port: a golden configuration from the seeding run, then
    steps of the round robin (tpe proposals of surrogate runs) that the database records."""
    wait_until(lambda: step_count(demo) >= 2, timeout=240, interval=1, what="two steps")
    status = demo.report("/api/status")
    assert status["golden"]["high_score"] is not None
    assert status["simulations_submitted"] >= 3
    assert status["orchestrator"]["state"] == "up"
    names = {event["name"] for event in demo.report("/api/events?limit=200")["events"]}
    assert {"golden_config_created", "proposal_accepted", "configuration_compared"} <= names
    assert _seedings(demo) == 1 and _golden_count(demo) >= 1
    check_no_duplicates(demo)


def test_crashed_orchestrator_and_broker_come_back_and_the_loop_resumes(
    demo: Compose, timings: Timings
):
    """SIGKILL of the orchestrator and the broker while a run is in flight: the restart policy
    brings both back healthy and the loop continues with no run, step or seeding repeated."""
    wait_until(
        lambda: demo.scalar(
            "SELECT COUNT(*) FROM snakelab.simulation_runs WHERE status IN ('queued', 'running')"
        ),
        timeout=120,
        interval=0.2,
        what="a run in flight",
    )
    before = step_count(demo)
    goldens = _golden_count(demo)
    killed_at = time.monotonic()
    restarts = {service: crash(demo, service) for service in ("orchestrator", "toolbroker")}
    for service, count in restarts.items():
        wait_until(
            lambda s=service, c=count: restarted_and_healthy(demo, s, c),
            timeout=180,
            interval=0.5,
            what=f"{service} restarted and healthy",
        )
    timings["crash to both healthy again"] = time.monotonic() - killed_at
    wait_until(lambda: step_count(demo) > before, timeout=180, interval=0.5, what="a new step")
    timings["crash to the next step"] = time.monotonic() - killed_at
    wait_until(lambda: step_count(demo) > before + 1, timeout=180, interval=0.5, what="2 steps")
    assert _seedings(demo) == 1 and _golden_count(demo) >= goldens
    check_no_duplicates(demo)


def test_down_and_up_again_resumes_where_it_was(demo: Compose, timings: Timings):
    """``down`` keeps the database volume: ``up`` again continues the same experiment (its
    golden configuration, its steps) instead of seeding a new one."""
    goldens = _golden_count(demo)
    demo.run("down")
    assert demo.run("ps", "-a", "-q").stdout.split() == []
    began = time.monotonic()
    demo.run("up", "-d")
    wait_until(demo.all_healthy, timeout=300, interval=1, what="every service healthy again")
    timings["up again to all healthy"] = time.monotonic() - began
    before = step_count(demo)
    wait_until(lambda: step_count(demo) > before, timeout=180, interval=0.5, what="a new step")
    assert _seedings(demo) == 1 and _golden_count(demo) >= goldens
    check_no_duplicates(demo)
