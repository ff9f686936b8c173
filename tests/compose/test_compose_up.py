"""The demo deployment (``compose.yaml`` + ``compose.demo.yaml``) on a real Docker engine: built
from the project's Dockerfile, started with generated secrets, healthy, advancing, crashed
and restarted by its restart policy, taken down and brought up again on the same volume."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compose_harness import (
    AWKWARD,
    ONE_OFF,
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


# Connects to each host:port given as arguments; prints one line per target: "open" or the error.
PROBE = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        print(target, "open")
    except OSError as exc:
        print(target, type(exc).__name__)
"""


def _probe_results(output: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in output.strip().splitlines())


def test_only_the_orchestrator_reaches_the_broker_tool_port(demo: Compose):
    """The broker's tool channel (61970) answers the orchestrator on the `tools` network, and
    nothing else: not a stranger's container on the project's default network, not the report
    server (internal and default networks), at any of the broker's addresses or names."""
    networks = demo.inspect("toolbroker")["NetworkSettings"]["Networks"]
    addresses = {name: net["IPAddress"] for name, net in networks.items() if net["IPAddress"]}
    assert len(addresses) == 3, addresses
    targets = [f"{ip}:61970" for ip in addresses.values()]
    targets += ["toolbroker:61970", "toolbroker-tools:61970"]
    allowed = demo.exec("orchestrator", "python", "-c", PROBE, "toolbroker-tools:61970")
    assert _probe_results(allowed.stdout) == {"toolbroker-tools:61970": "open"}, allowed.stderr
    image = demo.inspect("reports")["Config"]["Image"]
    stranger = subprocess.run(
        ["docker", "run", "--rm", "--network", f"{demo.project}_default", "--read-only",
         "--cap-drop", "ALL", "--entrypoint", "python", image, "-c", PROBE, *targets],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert stranger.returncode == 0, stranger.stderr
    results = _probe_results(stranger.stdout)
    assert set(results) == set(targets) and "open" not in results.values(), results
    reports = demo.exec("reports", "python", "-c", PROBE, *targets)
    results = _probe_results(reports.stdout)
    assert set(results) == set(targets) and "open" not in results.values(), results


def test_every_service_runs_read_only_without_capabilities(demo: Compose):
    """From docker inspect: a read-only root filesystem, every capability dropped and none
    added, no-new-privileges, memory and process limits, for every container; and inside each
    running one its main process holds no capability and cannot write to /."""
    for service in demo.services():
        host = demo.inspect(service)["HostConfig"]
        assert host["ReadonlyRootfs"] is True, service
        assert host["CapDrop"] == ["ALL"] and not host["CapAdd"], (service, host["CapAdd"])
        assert "no-new-privileges:true" in (host["SecurityOpt"] or []), service
        assert host["Memory"] > 0 and host["PidsLimit"] > 0, service
        assert not host["Privileged"], service
        if service in ONE_OFF:
            continue
        status = demo.exec(service, "cat", "/proc/1/status").stdout
        capabilities = dict(
            line.split(":\t", 1) for line in status.splitlines() if line.startswith("Cap")
        )
        for kind in ("CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(capabilities[kind], 16) == 0, (service, capabilities)
        assert "NoNewPrivs:\t1" in status, service
        written = demo.exec(service, "sh", "-c", "echo x > /probe-written")
        assert written.returncode != 0 and "Read-only" in written.stderr, (service, written)


def test_no_secret_in_inspect_command_lines_or_logs(demo: Compose):
    """No password (nor its random part alone) appears in any container's docker inspect
    (environment, command, healthcheck), in the command line of any process in any container
    or on the host, or in any container's log."""
    assert len(demo.secrets) == 5
    needles = {value.removesuffix(AWKWARD) for value in demo.secrets.values()}
    places: dict[str, str] = {}
    for service in demo.services():
        places[f"{service}: docker inspect"] = json.dumps(demo.inspect(service))
        log = subprocess.run(
            ["docker", "logs", demo.container(service)], capture_output=True, text=True
        )
        places[f"{service}: log"] = log.stdout + log.stderr
        if service not in ONE_OFF:
            lines = demo.exec(service, "sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
            assert lines.returncode == 0 and lines.stdout, (service, lines.stderr)
            places[f"{service}: command lines"] = lines.stdout
    host = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    places["host: command lines"] = host.stdout
    leaks = [place for place, text in places.items() if any(n in text for n in needles)]
    assert leaks == []
    # The services did log in with them: awkward characters and all, from the secret files.
    assert demo.scalar("SELECT COUNT(*) FROM mysql.user WHERE user = 'ax3l_reports'") == 1
    assert demo.report("/ready") is not None  # 200: the report server's login works


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

        def healthy_again(s: str = service, c: int = count) -> bool:
            return restarted_and_healthy(demo, s, c)

        wait_until(
            healthy_again,
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
