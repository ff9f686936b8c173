"""The seats' endpoint as compose's ``seats`` service (profile ``seats``, proposer
``external``) on a real Docker engine: its own container and database login, the turn board
shared with the orchestrator over the unix socket on their volume, and a seat taking a turn
through the published port."""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compose_harness import Compose, Timings, make_compose

from ax3l.testing.plugin import free_port, wait_until
from ax3l.testing.simple_agent import choose

pytestmark = pytest.mark.timeout(1800)
FILES = ["compose.yaml", "compose.demo.yaml"]


@pytest.fixture(scope="module")
def seats(base_images: None, output_dir: Path, timings: Timings) -> Iterator[tuple[Compose, int]]:
    """The demo stack with the seats profile and the external proposer; ``down -v`` after."""
    port = free_port()
    compose = make_compose(
        "ax3l-compose-seats",
        FILES,
        output_dir,
        profiles=["seats"],
        SNAKELAB_SURROGATE_SECONDS="2",
        AX3L_PROPOSER="external",
        AX3L_SEATS_PUBLISH=f"127.0.0.1:{port}",
    )
    compose.run("down", "-v", "--remove-orphans")
    began = time.monotonic()
    compose.run("build")
    timings["seats: build"] = time.monotonic() - began
    with compose.up(timings, "seats: up to all healthy", healthy_within=300):
        yield compose, port


def _call(port: int, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}  # fmt: skip
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=json.dumps(body).encode(),
        headers={
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "authorization": f"Bearer {token}",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return dict(json.loads(answer.read())["result"])


def test_the_seats_service_runs_apart_with_its_own_login_and_a_seat_takes_a_turn(
    seats: tuple[Compose, int],
) -> None:
    """The endpoint's container logs in as ax3l_seats, whose grants are exactly its own; the
    board socket is 0600 on the shared volume; a seat added in the orchestrator's container
    reads an open turn on the published port and its accepted submission is the turn's run,
    with the client's address in its event."""
    compose, port = seats
    grants = {row[0] for row in compose.sql("SHOW GRANTS FOR 'ax3l_seats'@'%'")}
    on_ax3l = {g.split(" TO ")[0] for g in grants if "`ax3l`" in g}
    assert on_ax3l == {
        "GRANT SELECT ON `ax3l`.`seats`",
    }, grants
    assert any(g.startswith("GRANT SELECT ON `snakelab`.*") for g in grants), grants
    assert len(grants) == 3, grants  # and USAGE (its login)
    logins = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'ax3l_seats'"
    assert compose.scalar(logins) >= 1
    for service in ("seats", "orchestrator"):
        mode = compose.exec(service, "stat", "-c", "%a %U", "/run/ax3l-board/board.sock")
        assert mode.stdout.split() == ["600", "ax3l"], (service, mode)
    environment = compose.inspect("seats")["Config"]["Env"]
    assert not any(line.startswith(("DB_USER=", "DB_PASSWORD")) for line in environment)

    added = compose.exec("orchestrator", "ax3l-seats", "add", "alice")
    assert added.returncode == 0, added.stderr
    token = next(w for w in added.stdout.split() if w.startswith("ax3l-seat-"))

    def open_turn() -> dict[str, Any] | None:
        try:
            turn = _call(port, token, "current_turn", {})["structuredContent"]
        except (OSError, urllib.error.URLError, KeyError, ValueError):
            return None
        return turn if turn.get("open") else None

    turn = wait_until(open_turn, timeout=300, interval=1, what="a turn open to the seats")
    result = _call(port, token, f"{turn['tool']}", choose(turn, random.Random(7)))
    reply = json.loads(result["content"][0]["text"])
    assert reply["status"] == "ok", reply
    rows = compose.sql(
        "SELECT m.content FROM ax3l.events e JOIN ax3l.event_messages m USING (event_id)"
        " WHERE e.name = 'seat_call' AND m.content LIKE '%accepted%'"
    )
    accepted = [json.loads(row[0]) for row in rows]
    assert [a["run_id"] for a in accepted] == [reply["run_id"]]
    assert accepted[0]["client"]  # the address the endpoint saw (Docker's gateway)
    wait_until(
        lambda: (
            compose.scalar(
                "SELECT COUNT(*) FROM ax3l.events e JOIN ax3l.event_messages m USING (event_id)"
                f" WHERE e.name = 'proposal_accepted' AND m.content LIKE '%{reply['run_id']}%'"
            )
            >= 1
        ),
        timeout=60,
        interval=1,
        what="the proposal accepted in the events",
    )
