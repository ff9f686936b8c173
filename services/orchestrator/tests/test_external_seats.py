"""Seats: outside agents take the experiment's turns through the Streamable HTTP MCP endpoint.

Every test runs the real stack (reference SnakeLab, broker, orchestrator with the ``external``
proposer) and talks to it with the MCP SDK's own Streamable HTTP client, as a seat would.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from orchestrator_stack import compared

from ax3l.shared.config_schema import load_schema
from ax3l.shared.registry import BY_NAME
from ax3l.testing.databases import run_module
from ax3l.testing.mcp_wire import call_tool, initialize
from ax3l.testing.plugin import free_port
from ax3l.testing.simple_agent import choose
from ax3l.testing.stack import Proc, Stack

SCHEMA = load_schema(None)


def seats_cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return run_module("ax3l.orchestrator.seats_cli", *args, env=stack.base_env(), timeout=60)


def add_seat(stack: Stack, name: str) -> str:
    done = seats_cli(stack, "add", name)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    assert token.startswith("ax3l-seat-")
    return token


# The door's address and global rates out of the way: the tests poll with a new session each
# time (several requests), which a loaded machine bunches past 20 a second; test_seat_endpoint
# tests those limits.
DOOR_RATES = {"AX3L_SEATS_RATE_PER_ADDRESS": "100000", "AX3L_SEATS_RATE_GLOBAL": "100000"}


def start_external(stack: Stack, **env: str) -> tuple[Proc, str]:
    """An orchestrator with the external proposer; returns it and the seats' MCP URL."""
    port = free_port()
    settings = {"AX3L_SEATS_PORT": str(port), "AX3L_LLM_FALLBACK": "none", **DOOR_RATES, **env}
    proc = stack.orchestrator("external", env=settings)
    return proc, f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def seat_client(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    async with seat_client(url, token) as client:
        return await client.call_tool(tool, arguments)


def text_of(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def payload(result: CallToolResult) -> dict[str, Any]:
    if isinstance(result.structured_content, dict):
        return result.structured_content
    return dict(json.loads(text_of(result)))


def wait_for_turn(stack: Stack, url: str, token: str, proc: Proc) -> dict[str, Any]:
    def open_turn() -> dict[str, Any] | None:
        try:
            turn = payload(asyncio.run(call(url, token, "current_turn", {})))
        except Exception:  # the endpoint may not listen yet
            return None
        return turn if turn.get("open") else None

    return dict(stack.wait_for(open_turn, 60, "an open turn for the seats", proc))


@pytest.mark.long  # ~10-20 s: out of the default suite's 15 minutes
def test_a_seat_takes_seven_turns_and_a_racing_seat_is_refused(stack: Stack) -> None:
    """A seat's SDK client takes a whole cycle of turns; of two seats racing, only one wins."""
    stack.start()
    alice, bob = add_seat(stack, "alice"), add_seat(stack, "bob")
    proc, url = start_external(stack, AX3L_SEAT_RATE_LIMIT="100000")
    rng = random.Random(7)
    for turn_number in range(7):
        turn = wait_for_turn(stack, url, alice, proc)
        assert turn["entry"] == BY_NAME[turn["entry"]].name
        assert turn["index"] == turn_number
        assert "ProjectContext" in [p["source_name"] for p in turn["prompts"]]
        history = payload(asyncio.run(call(url, alice, "history", {"entry": turn["entry"]})))
        assert history["entry"] == turn["entry"] and isinstance(history["history"], list)
        values = choose(turn, rng)
        if turn_number == 0:
            results = asyncio.run(race(url, turn["tool"], values, choose(turn, rng), alice, bob))
            texts = sorted(text_of(r) for r in results)
            assert sum(payload_ok(r) for r in results) == 1, texts
            loser = next(r for r in results if not payload_ok(r))
            assert loser.is_error and "already taken by another seat" in text_of(loser)
            continue
        result = asyncio.run(call(url, alice, turn["tool"], values))
        assert payload_ok(result), text_of(result)
    stack.wait_for(compared(stack, 7), 60, "seven steps", proc)
    # The endpoint ran apart: a child process of the orchestrator's, gone when it stops.
    (endpoint,) = endpoint_processes(proc.pid)
    proc.stop()
    assert not Path(f"/proc/{endpoint}").exists()

    events = stack.events()
    started = [e for e in events if e.name == "conversation_started"]
    assert started and all(e.get("proposer") == "external" for e in started)
    accepted = [e for e in events if e.name == "seat_call" and e.get("outcome") == "accepted"]
    assert len(accepted) >= 7
    assert [e.get("checkpoint_event_id") for e in accepted] == [
        e.get("checkpoint_event_id")
        for e in events
        if e.name == "proposal_accepted" and e.get("checkpoint_event_id") is not None
    ][: len(accepted)]
    seat_events = [e for e in events if e.name in ("seat_call", "seat_call_refused")]
    assert all(e.source_name == e.get("seat") for e in seat_events)
    assert {e.source_name for e in seat_events} == {"alice", "bob"}
    refused = [e for e in seat_events if e.name == "seat_call_refused"]
    assert [e.get("reason") for e in refused] == ["turn_taken"]
    stored = json.dumps([(e.source_name, e.content) for e in events])
    assert alice not in stored and bob not in stored


def endpoint_processes(parent: int) -> list[int]:
    """The orchestrator's children that are the seats' endpoint process."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"ax3l.orchestrator.seat_process" in command:
            found.append(int(stat.parent.name))
    return found


def payload_ok(result: CallToolResult) -> bool:
    try:
        return not result.is_error and payload(result).get("status") == "ok"
    except ValueError:
        return False


async def race(
    url: str,
    tool: str,
    first: dict[str, Any],
    second: dict[str, Any],
    token_1: str,
    token_2: str,
) -> list[CallToolResult]:
    async with seat_client(url, token_1) as one, seat_client(url, token_2) as two:
        return list(await asyncio.gather(one.call_tool(tool, first), two.call_tool(tool, second)))


def test_wrong_and_revoked_tokens_are_refused_before_any_tool_runs(stack: Stack) -> None:
    """An unknown token, a revoked seat's token and no token get 401 (counted, never written
    as events)."""
    stack.start(surrogate_seconds=30)
    token = add_seat(stack, "carol")
    listing = seats_cli(stack, "list")
    assert "carol" in listing.stdout and "active" in listing.stdout
    assert token not in listing.stdout
    proc, url = start_external(stack, AX3L_SEAT_TOKEN_REFRESH="0.2")
    stack.wait_for(lambda: _status_code(url, token) == 200, 60, "the seat endpoint", proc)

    assert _status_code(url, "ax3l-seat-not-a-real-token") == 401
    assert "belongs to no seat" in _answer(url, "ax3l-seat-not-a-real-token")
    assert _status_code(url, None) == 401
    revoked = seats_cli(stack, "revoke", "carol")
    assert revoked.returncode == 0, revoked.stderr
    stack.wait_for(lambda: _status_code(url, token) == 401, 5, "the revoke", proc)
    assert "seat 'carol' was revoked" in _answer(url, token)
    with pytest.raises(BaseExceptionGroup) as refused:
        asyncio.run(call(url, token, "current_turn", {}))
    assert refused.group_contains(MCPError)
    assert "revoked" in seats_cli(stack, "list").stdout
    again = seats_cli(stack, "add", "carol")
    assert again.returncode == 0 and again.stdout.strip().splitlines()[-1] != token
    proc.stop()

    # Refused at the door: counted, not one event.
    assert stack.count("seat_call", "seat_call_refused") == 0
    with stack._cursor() as cur:
        cur.execute("SELECT token_hash FROM seats")
        hashes = [row[0] for row in cur.fetchall()]
    assert len(hashes) == 1 and token not in hashes and len(hashes[0]) == 64
    assert token not in json.dumps([e.content for e in stack.events()])


def _status_code(url: str, token: str | None) -> int:
    """The HTTP status of an MCP ``initialize`` POST with this bearer token (0: no answer)."""
    try:
        return _initialize(url, token).status_code
    except httpx2.HTTPError:
        return 0


def _answer(url: str, token: str | None) -> str:
    return str(_initialize(url, token).json()["error_description"])


def _initialize(url: str, token: str | None) -> httpx2.Response:
    headers = {"accept": "application/json, text/event-stream"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return httpx2.post(url, json=initialize(), headers=headers, timeout=5)


def test_no_open_turn_wrong_kind_and_rate_limit_are_clear_tool_errors(stack: Stack) -> None:
    """No open turn, the wrong tool for the turn and too many calls each get a logged tool
    error, and none reaches the broker."""
    stack.start(surrogate_seconds=2)
    token = add_seat(stack, "dave")
    proc, url = start_external(stack, AX3L_SEAT_RATE_LIMIT="6")
    stack.wait_for(lambda: _status_code(url, token) == 200, 60, "the seat endpoint", proc)
    # The seeding run takes two seconds: no turn is open yet.
    early = asyncio.run(call(url, token, "submit_single_value", {"value": 208}))
    assert early.is_error and "no turn is open" in text_of(early)
    # Waiting from the events keeps the seat's few calls under its rate limit.
    stack.wait_for(lambda: stack.count("conversation_started") >= 1, 60, "the first turn", proc)
    turn = payload(asyncio.run(call(url, token, "current_turn", {})))
    assert turn["open"] and turn["entry"] == "hidden_size"
    wrong = asyncio.run(call(url, token, "submit_pair_values", {"value_1": 0.9, "value_2": 0.9}))
    assert wrong.is_error and "submit_single_value(value)" in text_of(wrong)
    typed = asyncio.run(call(url, token, "submit_single_value", {"value": "208"}))
    assert typed.is_error

    async def flood() -> list[CallToolResult]:
        results: list[CallToolResult] = []
        async with seat_client(url, token) as client:
            while not (results and results[-1].is_error) and len(results) < 6:
                results.append(await client.call_tool("current_turn", {}))
        return results

    limited = [r for r in asyncio.run(flood()) if r.is_error]
    assert limited and "AX3L_SEAT_RATE_LIMIT" in text_of(limited[0])
    # Told once; until its window frees the seat is refused at the door (429).
    assert _initialize(url, token).status_code == 429
    proc.stop()

    reasons = [e.get("reason") for e in stack.events("seat_call_refused")]
    assert {"no_turn", "wrong_kind"} <= set(reasons)
    assert "rate_limited" not in reasons  # counted, not written
    assert all(e.source_name == "dave" for e in stack.events("seat_call_refused"))
    assert stack.count("tool_request_received") == 0


def test_a_silent_seat_lets_the_turn_fall_back_after_the_deadline(stack: Stack) -> None:
    """With no seat submitting, each turn goes to the fallback after the deadline, logged so."""
    stack.start()
    proc, _ = start_external(stack, AX3L_EXTERNAL_DEADLINE="0.5", AX3L_LLM_FALLBACK="random")
    stack.wait_for(compared(stack, 2), 60, "two steps", proc)
    proc.stop()

    events = stack.events()
    started = [e for e in events if e.name == "conversation_started"]
    external = [e for e in started if e.get("proposer") == "external"]
    fallback = [e for e in started if e.get("fallback_for") == "external"]
    assert len(external) >= 2 and len(fallback) >= 2
    assert all(e.get("proposer") == "random" and e.get("waited_seconds") == 0.5 for e in fallback)
    assert all(e.get("checkpoint_event_id") is not None for e in fallback)
    ended = [
        e for e in events if e.name == "conversation_ended" and e.get("proposer") == "external"
    ]
    assert ended and all("no seat" in (e.get("error") or "") for e in ended)


def test_hostile_calls_are_refused_or_answered_without_a_crash_or_a_submission(
    stack: Stack,
) -> None:
    """Hundreds of malformed, mistyped (a pair with a string or a boolean beside a valid
    number), oversized and unauthenticated requests while a turn is open: every one gets a 4xx
    or a tool error, nothing reaches the broker, and the endpoint still shows the same turn
    open afterwards."""
    stack.start()
    token = add_seat(stack, "eve")
    proc, url = start_external(
        stack, AX3L_SEAT_RATE_LIMIT="100000", AX3L_SEATS_RATE_PER_ADDRESS="100000"
    )
    turn = wait_for_turn(stack, url, token, proc)
    rng = random.Random(15)
    good = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}

    def encoded(arguments: Any, tool: str = "submit_single_value") -> bytes:
        return json.dumps(call_tool(rng.randrange(10**6), tool, arguments)).encode()

    hostile: list[tuple[dict[str, str], bytes]] = []
    for _ in range(40):
        junk = rng.choice(
            [b"{", b"[]", b"null", b'"x"', bytes(rng.randrange(256) for _ in range(64))]
        )
        hostile.append((good, junk))
        hostile.append((good, encoded({"value": rng.choice(["1", True, None, [1]])})))
        pair: dict[str, Any] = {"value_1": 3, "value_2": -1}
        pair[rng.choice(["value_1", "value_2"])] = rng.choice(["a", "3", True, False])
        hostile.append((good, encoded(pair, "submit_pair_values")))
        hostile.append((good, b'{"jsonrpc": "2.0", "id": 1, "method": "no/such"}'))
        hostile.append(({"accept": good["accept"]}, encoded({"value": 224})))
        hostile.append(({**good, "authorization": "Bearer " + "A" * 5000}, encoded({"value": 224})))
    hostile.append((good, b'{"jsonrpc": "2.0", "padding": "' + b"x" * 5_000_000 + b'"}'))
    statuses = []
    with httpx2.Client(timeout=20) as http:
        for headers, body in hostile:
            answer = http.post(
                url, content=body, headers={**headers, "content-type": "application/json"}
            )
            statuses.append(answer.status_code)
            if answer.status_code == 200 and b'"isError"' in answer.content:
                assert b'"isError":true' in answer.content.replace(b" ", b"")
    assert all(400 <= code < 500 or code == 200 for code in statuses), sorted(set(statuses))
    assert statuses.count(401) >= 80
    assert proc.alive()
    after = payload(asyncio.run(call(url, token, "current_turn", {})))
    assert after["open"] is True and after["checkpoint_event_id"] == turn["checkpoint_event_id"]
    proc.stop()
    assert stack.count("tool_request_received", "proposal_accepted") == 0
    # The 401s wrote nothing; what was written is the seat's own, bounded calls.
    door = {"no_token", "unknown_token", "revoked", "rate_limited"}
    assert not [e for e in stack.events("seat_call_refused") if e.get("reason") in door]


AGENTS_PAGE = Path(__file__).resolve().parents[3] / "docs" / "agents.md"


def readme_agent() -> str:
    """The Python agent of docs/agents.md, exactly as the page shows it."""
    text = AGENTS_PAGE.read_text()
    start = text.index("```python\n", text.index("A Python agent with the MCP SDK")) + 10
    return text[start : text.index("```\n", start)]


async def spend_calls(url: str, token: str, calls: int) -> None:
    """Up to ``calls`` tool calls of the seat (``current_turn``), in one session, until one is
    refused for the rate limit."""
    async with seat_client(url, token) as client:
        for _ in range(calls):
            if (await client.call_tool("current_turn", {})).is_error:
                return


def run_readme_agent(
    stack: Stack, tmp_path: Path, turns: int, timeout: float, spent: int = 0
) -> tuple[subprocess.CompletedProcess[str], Proc, str]:
    """The agent example of docs/agents.md, copied out of the page and run as a program with a
    seat's token against an orchestrator with the external proposer at the default rate limit, after
    the seat made ``spent`` more calls."""
    stack.start()
    token = add_seat(stack, "readme")
    proc, url = start_external(stack)
    turn = wait_for_turn(stack, url, token, proc)
    for rule in turn["rules"]:
        leaf = SCHEMA.by_path[rule["setting"]]
        assert (rule["minimum"], rule["maximum"]) == (leaf.minimum, leaf.maximum)
        assert rule["type"] == leaf.type and rule["golden_value"] is not None
    agent = tmp_path / "agent.py"
    agent.write_text(readme_agent())
    asyncio.run(spend_calls(url, token, spent))
    done = subprocess.run(
        [sys.executable, str(agent), url, token, str(turns)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done, proc, url


def test_the_readmes_agent_runs_as_written_and_takes_three_turns(
    stack: Stack, tmp_path: Path
) -> None:
    """At the default rate limit, the docs' agent reads each turn's machine-readable rules
    (or its open choices) and takes three turns, each accepted and run; the rules it used give
    each argument's bounds as numbers."""
    done, proc, _ = run_readme_agent(stack, tmp_path, 3, 180)
    printed = done.stdout.strip().splitlines()
    assert len(printed) >= 3 and all("run_id" in line for line in printed[-3:]), printed
    stack.wait_for(lambda: stack.count("proposal_accepted") >= 3, 60, "three proposals", proc)
    proc.stop()
    accepted = stack.events("seat_call")
    assert sum(e.get("outcome") == "accepted" for e in accepted) >= 3


@pytest.mark.long  # about 5 minutes: 100 turns are 200 calls or more at 60 a minute
@pytest.mark.timeout(900)
def test_the_readmes_agent_takes_100_turns_at_the_default_rate_limit(
    stack: Stack, tmp_path: Path
) -> None:
    """The seat starts at the default limit (60 calls a minute, most of them spent), so the
    agent is refused at once: it waits as told and goes on, to 100 turns."""
    done, proc, url = run_readme_agent(stack, tmp_path, 100, 800, spent=60)
    assert "waiting" in done.stderr, done.stderr[-2000:]  # refused, and waited
    printed = [line for line in done.stdout.splitlines() if "run_id" in line]
    assert len(printed) >= 100, done.stdout[-2000:]
    metrics = httpx2.get(url.removesuffix("/mcp") + "/metrics").text
    assert 'ax3l_seat_refused_total{reason="rate_limited"}' in metrics
    proc.stop()
    assert stack.count("proposal_accepted") >= 100
