"""The seats' endpoint at the door and at the turn: refused traffic writes nothing, a revoke
holds within its stated bound, arguments are typed exactly, a seat gets its share and no more,
the Host is checked on any bind, and two concurrent adds of one seat leave one token.

The endpoint runs for real (uvicorn on a free port, the real MariaDB, a scripted broker on a
real ZeroMQ socket); the requests are plain HTTP, as anyone on the internet could send them.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from ax3l.orchestrator.seat_limits import Buckets, HostCheck, client_address, parse_networks
from ax3l.orchestrator.seat_server import MAX_BODY, SeatEndpoint, SeatReads, turn_payload
from ax3l.orchestrator.seat_turns import OpenTurn, TurnBoard
from ax3l.orchestrator.seats import SeatDirectory, add_seat
from ax3l.shared.config_schema import load_schema
from ax3l.shared.db.cli import ensure_schema
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.db.seats import SeatError, revoke_seat
from ax3l.shared.event_models import GoldenConfigCreated
from ax3l.shared.registry import BY_NAME
from ax3l.shared.settings import SeatsServiceSettings
from ax3l.testing.databases import TestDatabases, mysql_connection, seats_login
from ax3l.testing.mcp_wire import call_tool, initialize
from ax3l.testing.plugin import free_port
from ax3l.testing.zmq_peer import ScriptedPeer, broker_reply

SCHEMA = load_schema(None)
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
CURRENT_TURN = call_tool(1, "current_turn", {})


@dataclass
class Running:
    endpoint: SeatEndpoint
    board: TurnBoard
    url: str
    databases: TestDatabases

    def events(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        rows = self.databases.query(
            "SELECT e.name, e.source_name, m.content FROM events e"
            " LEFT JOIN event_messages m USING (event_id) ORDER BY e.event_id",
            database=self.databases.ax3l_db,
        )
        return [(r[0], r[1], json.loads(r[2]) if r[2] else {}) for r in rows]

    async def metrics(self, http: httpx2.AsyncClient) -> dict[str, float]:
        text = (await http.get(self.url.replace("/mcp", "/metrics"))).text
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                values[key] = float(value)
        return values


def seat(databases: TestDatabases, name: str, change: Callable[[Any, str], Any] = add_seat) -> Any:
    """``add_seat`` (the new token) or another change of the seat ``name``, as Ax3l's user."""
    conn = databases.connect("ax3l", databases.ax3l_db)
    try:
        return change(conn, name)
    finally:
        conn.close()


@asynccontextmanager
async def running(
    databases: TestDatabases, broker: str = "tcp://127.0.0.1:9", **overrides: Any
) -> AsyncIterator[Running]:
    port = free_port()
    settings = databases.settings(
        AX3L_SEATS_PORT=port, AX3L_ZMQ_ENDPOINT=broker, AX3L_ZMQ_TIMEOUT=5, **overrides
    )
    db = Database(settings)
    await db.open()
    board = TurnBoard()
    reads = SeatReads(db, SCHEMA, ConfigIndex(db, SCHEMA), SeatDirectory(db))
    endpoint = SeatEndpoint(reads, EventLog(db), settings, board)
    await endpoint.start()
    try:
        yield Running(endpoint, board, f"http://127.0.0.1:{port}/mcp", databases)
    finally:
        await endpoint.stop()
        await db.close()


async def post(
    http: httpx2.AsyncClient, url: str, body: Any, token: str | None = None, **headers: str
) -> httpx2.Response:
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await http.post(url, content=content, headers={**ACCEPT, **headers})


def tool_result(answer: httpx2.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["result"])


async def test_refused_requests_write_nothing_and_are_counted(databases: TestDatabases) -> None:
    """No token, a wrong token, a stranger over the address's rate and a seat over its own
    limit: every one refused, counted, and not one row written."""
    async with (
        running(databases, AX3L_SEATS_RATE_PER_ADDRESS=5, AX3L_SEAT_RATE_LIMIT=2) as run,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        token = seat(databases, "alice")
        statuses = [
            (await post(http, run.url, initialize(), token=bad)).status_code
            for bad in [None, "ax3l-seat-nobody", "x" * 5000] * 8
        ]
        assert set(statuses) == {401, 429}
        assert statuses[:10] == [401] * 10  # the burst: twice the rate
        await asyncio.sleep(1.2)  # the address's bucket fills again
        polls = [await post(http, run.url, CURRENT_TURN, token=token) for _ in range(5)]
        # Two calls, then a tool error that says why, then 429 at the door.
        assert [p.status_code for p in polls] == [200, 200, 200, 429, 429]
        results = [tool_result(p) for p in polls[:3]]
        assert [r.get("isError", False) for r in results] == [False, False, True]
        assert "AX3L_SEAT_RATE_LIMIT" in results[-1]["content"][0]["text"]
        assert int(polls[-1].headers["retry-after"]) > 50
        counts = await run.metrics(http)
    assert run.events() == []
    no_token = [s for s, bad in zip(statuses, [None, 1, 2] * 8, strict=True) if bad is None]
    assert counts['ax3l_seat_refused_total{reason="no_token"}'] == no_token.count(401) >= 4
    assert counts['ax3l_seat_refused_total{reason="unknown_token"}'] == (
        statuses.count(401) - no_token.count(401)
    )
    assert counts['ax3l_seat_refused_total{reason="too_many_requests"}'] == statuses.count(429)
    assert counts['ax3l_seat_refused_total{reason="rate_limited"}'] == 3
    assert counts['ax3l_seat_calls_total{tool="current_turn_closed"}'] == 2


async def test_a_revoked_token_stops_working_within_the_refresh_bound(
    databases: TestDatabases,
) -> None:
    """A revoke takes effect within AX3L_SEAT_TOKEN_REFRESH seconds, and not one request
    after; a new seat's token starts working within the same bound."""
    bound = 0.5
    async with (
        running(databases, AX3L_SEAT_TOKEN_REFRESH=bound) as run,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        token = seat(databases, "carol")
        await asyncio.sleep(bound)
        assert (await post(http, run.url, initialize(), token=token)).status_code == 200
        seat(databases, "carol", revoke_seat)
        revoked_at = time.monotonic()
        while (await post(http, run.url, initialize(), token=token)).status_code == 200:
            assert time.monotonic() - revoked_at <= bound + 0.2, "the revoke took too long"
            await asyncio.sleep(0.02)
        for _ in range(5):  # and it stays refused
            answer = await post(http, run.url, initialize(), token=token)
            assert answer.status_code == 401 and "was revoked" in answer.text
        fresh = seat(databases, "dora")
        added_at = time.monotonic()
        while (await post(http, run.url, initialize(), token=fresh)).status_code != 200:
            assert time.monotonic() - added_at <= bound + 0.2, "the new token took too long"
            await asyncio.sleep(0.02)
    assert run.events() == []


async def test_history_arguments_are_typed_exactly(databases: TestDatabases) -> None:
    """A 4 MiB entry is refused before it is read; a long or unknown name at the type check;
    none of them is written anywhere."""
    async with running(databases) as run, httpx2.AsyncClient(timeout=30) as http:
        token = seat(databases, "erin")
        huge = await post(http, run.url, call_tool(1, "history", {"entry": "h" * 4 * 2**20}), token)
        assert huge.status_code == 413
        for entry in ["h" * (MAX_BODY - 200), "no_such_entry", 7]:
            result = tool_result(
                await post(http, run.url, call_tool(1, "history", {"entry": entry}), token=token)
            )
            text = result["content"][0]["text"]
            assert result["isError"] and "hidden_size" in text and len(text) < 4096
        events = run.events()
    assert events == []


def golden() -> GoldenConfigCreated:
    return GoldenConfigCreated(
        run_id="golden-1",
        config=SCHEMA.default_config(),
        high_score=3,
        seed=1,
        simulations=1,
        reason="test",
        kind="seeding",
    )


async def open_turn(log: EventLog, board: TurnBoard, number: int) -> OpenTurn:
    """A turn on the board, as the external proposer opens one after its started event."""
    started = await log.log("conversation_started", {"proposer": "external", "parameter": "gamma"})
    turn = OpenTurn(
        entry=BY_NAME["gamma"],
        index=4,
        checkpoint_event_id=1000 + number,
        conversation_id=f"c{number}",
        started_event_id=started,
        golden=golden(),
        prompts=[],
        deadline_seconds=60,
    )
    board.open(turn)
    return turn


async def seen_open(http: httpx2.AsyncClient, url: str, token: str) -> dict[str, Any]:
    """``current_turn``, polled until the open turn reaches the endpoint's process."""
    for _ in range(100):
        shown = tool_result(await post(http, url, CURRENT_TURN, token))["structuredContent"]
        if shown["open"]:
            break
        await asyncio.sleep(0.05)
    return dict(shown)


async def test_a_seat_over_its_share_is_refused_and_the_winner_is_not_named(
    databases: TestDatabases,
) -> None:
    """With AX3L_SEAT_TURN_SHARE=0.2 a seat wins at most 2 of 10 turns; its third submission
    is refused with the reason, another seat still wins, and a loser is not told who won."""
    runs = iter(range(100))
    peer = ScriptedPeer(
        lambda request: broker_reply(request, {"status": "ok", "run_id": f"run-{next(runs)}"})
    )
    try:
        async with (
            running(databases, broker=peer.endpoint, AX3L_SEAT_TURN_SHARE=0.2) as run,
            httpx2.AsyncClient(timeout=10) as http,
        ):
            alice, bob = seat(databases, "alice"), seat(databases, "bob")
            submit = call_tool(1, "submit_single_value", {"value": 0.95})
            for number in range(2):
                turn = await open_turn(run.endpoint.log, run.board, number)
                won = tool_result(await post(http, run.url, submit, token=alice))
                assert json.loads(won["content"][0]["text"])["status"] == "ok", won
                lost = tool_result(await post(http, run.url, submit, token=bob))
                text = lost["content"][0]["text"]
                assert lost["isError"] and "by another seat" in text and "alice" not in text
                await run.board.close(turn)
            turn = await open_turn(run.endpoint.log, run.board, 2)
            over = tool_result(await post(http, run.url, submit, token=alice))
            text = over["content"][0]["text"]
            assert over["isError"] and "AX3L_SEAT_TURN_SHARE" in text and "won 2 of" in text
            taken = tool_result(await post(http, run.url, submit, token=bob))
            assert json.loads(taken["content"][0]["text"])["status"] == "ok"
            assert turn.winner == "bob"
            await run.board.close(turn)
    finally:
        peer.close()
    assert len(peer.requests) == 3
    refused = [(e[1], e[2].get("reason")) for e in run.events() if e[0] == "seat_call_refused"]
    assert refused == [("bob", "turn_taken"), ("bob", "turn_taken"), ("alice", "over_share")]


async def test_current_turn_polls_are_counted_and_its_payload_is_built_once(
    snakelab_tables: TestDatabases,
) -> None:
    """Many polls of one open turn are one event per seat, and one payload."""
    async with (
        running(snakelab_tables, AX3L_SEAT_RATE_LIMIT=1000) as run,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        token = seat(snakelab_tables, "fay")
        turn = await open_turn(run.endpoint.log, run.board, 0)
        bodies = [
            tool_result(await post(http, run.url, CURRENT_TURN, token=token)) for _ in range(20)
        ]
        assert all(b["structuredContent"]["entry"] == "gamma" for b in bodies)
        first = run.endpoint._turn_payload
        assert first is not None and first[0] is turn
        await run.board.close(turn)
    opened = [e for e in run.events() if e[0].startswith("seat_call")]
    assert len(opened) == 1 and opened[0][2]["open"] is True


async def test_a_wrong_host_or_origin_is_refused_on_a_wildcard_bind(
    databases: TestDatabases,
) -> None:
    """On 0.0.0.0 the Host and Origin checks still hold (before any token is read), and the
    names of AX3L_SEATS_ALLOWED_HOSTS are answered."""
    async with (
        running(
            databases, AX3L_SEATS_HOST="0.0.0.0", AX3L_SEATS_ALLOWED_HOSTS="ax3l.example.org"
        ) as run,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        token = seat(databases, "gus")
        evil = await post(http, run.url, initialize(), token=token, host="evil.example:28873")
        assert evil.status_code == 421
        origin = await post(http, run.url, initialize(), token=token, origin="http://evil.example")
        assert origin.status_code == 403
        stranger = await post(http, run.url, initialize(), host="evil.example")
        assert stranger.status_code == 421  # the Host is checked before the token
        good = await post(http, run.url, initialize(), token=token, host="ax3l.example.org")
        assert good.status_code == 200
        same = await post(
            http, run.url, initialize(), token=token, origin="https://ax3l.example.org"
        )
        assert same.status_code == 200
        counts = await run.metrics(http)
    assert counts['ax3l_seat_refused_total{reason="wrong_host"}'] == 2
    assert counts['ax3l_seat_refused_total{reason="wrong_origin"}'] == 1


async def test_strangers_from_many_addresses_cannot_lock_a_seat_out(
    databases: TestDatabases,
) -> None:
    """M1: token-less requests from a hundred addresses (one of them the seat's own) empty the
    strangers' shared bucket, and the seat's polls, between them, are all answered: its token
    is read before any bucket is charged, and its bucket is its own. Addresses of one IPv6 /64
    share one address bucket."""
    proxy = {"AX3L_SEATS_TRUSTED_PROXIES": "127.0.0.1"}
    async with (
        running(databases, AX3L_SEATS_RATE_GLOBAL=2, AX3L_SEATS_RATE_PER_ADDRESS=5, **proxy) as run,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        token = seat(databases, "kim")
        own = {"x-forwarded-for": "198.51.100.7"}
        strangers, polls = [], []
        for n in range(100):
            address = {"x-forwarded-for": f"198.51.100.{n}"}
            strangers.append((await post(http, run.url, CURRENT_TURN, **address)).status_code)
            if n % 10 == 9:
                polls.append(await post(http, run.url, CURRENT_TURN, token=token, **own))
        assert strangers.count(429) >= 50 and set(strangers) == {401, 429}
        assert [p.status_code for p in polls] == [200] * 10
        assert all(tool_result(p)["structuredContent"]["open"] is False for p in polls)
    async with (
        running(databases, AX3L_SEATS_RATE_PER_ADDRESS=5, **proxy) as run,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        rotating = [
            (await post(http, run.url, CURRENT_TURN, **{"x-forwarded-for": f"2001:db8:0:7::{n:x}"}))
            for n in range(1, 16)
        ]
        other = await post(http, run.url, CURRENT_TURN, **{"x-forwarded-for": "2001:db8:0:8::1"})
    assert [r.status_code for r in rotating] == [401] * 10 + [429] * 5
    assert other.status_code == 401


async def raw_request(
    url: str, method: str, token: str, body: bytes = b"", length: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A request written on a connection of its own, its body possibly short of the
    ``length`` it announces (the rest never sent); the connection, left open."""
    host = url.split("/")[2]
    reader, writer = await asyncio.open_connection(*host.split(":"))
    head = (
        f"{method} /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
    )
    if method == "POST":
        head += f"Content-Length: {len(body) if length is None else length}\r\n"
    writer.write(head.encode() + b"\r\n" + body)
    await writer.drain()
    return reader, writer


async def status_of(reader: asyncio.StreamReader) -> int:
    line = await asyncio.wait_for(reader.readline(), 30)
    return int(line.split()[1])


async def test_one_seat_cannot_hold_the_connection_slots(databases: TestDatabases) -> None:
    """M2: a seat's 64 GET requests (event streams that would never end) get 405 and hold no
    slot, so another seat's poll is answered; a seat's fifth request in flight gets 429; a
    request that outlives the deadline gets 504 and frees its place."""
    async with (
        running(databases, AX3L_SEATS_RATE_PER_ADDRESS=100_000) as run,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        greedy, other = seat(databases, "greedy"), seat(databases, "other")
        streams, statuses = [], []
        try:
            for _ in range(64):  # each left open by the client
                streams.append(await raw_request(run.url, "GET", greedy))
                statuses.append(await status_of(streams[-1][0]))
            poll = await post(http, run.url, CURRENT_TURN, token=other)
            assert poll.status_code == 200, poll.text
            assert statuses == [405] * 64
            # The endpoint closed each refused connection itself.
            ends = [await asyncio.wait_for(reader.read(), 10) for reader, _ in streams]
            assert all(end.endswith(b"}") for end in ends)
        finally:
            for _, writer in streams:
                writer.close()
        assert run.endpoint._auth is not None
        run.endpoint._auth.deadline = 1.0
        body = json.dumps(CURRENT_TURN).encode()
        slow = [await raw_request(run.url, "POST", greedy, body[:10], len(body)) for _ in range(4)]
        try:
            for _ in range(100):  # the four are being served (waiting for their bodies)
                if run.endpoint._auth.in_flight["greedy"] == 4:
                    break
                await asyncio.sleep(0.02)
            fifth = await post(http, run.url, CURRENT_TURN, token=greedy)
            assert fifth.status_code == 429 and "requests being served" in fifth.text
            assert (await post(http, run.url, CURRENT_TURN, token=other)).status_code == 200
            assert [await status_of(reader) for reader, _ in slow] == [504] * 4
        finally:
            for _, writer in slow:
                writer.close()
        again = await post(http, run.url, CURRENT_TURN, token=greedy)
        assert again.status_code == 200, again.text
        counts = await run.metrics(http)
    assert counts['ax3l_seat_refused_total{reason="wrong_method"}'] == 64
    assert counts['ax3l_seat_refused_total{reason="in_flight"}'] == 1
    assert counts['ax3l_seat_refused_total{reason="deadline"}'] == 4


def test_the_client_address_comes_from_a_proxy_header_only_behind_a_trusted_proxy() -> None:
    trusted = parse_networks("10.0.0.0/8, 127.0.0.1")
    assert client_address("203.0.113.9", "1.2.3.4", []) == "203.0.113.9"
    assert client_address("203.0.113.9", "1.2.3.4", trusted) == "203.0.113.9"
    assert client_address("127.0.0.1", "1.2.3.4", []) == "127.0.0.1"
    assert client_address("127.0.0.1", "9.9.9.9, 1.2.3.4, 10.1.1.1", trusted) == "1.2.3.4"
    assert client_address("127.0.0.1", "garbage", trusted) == "127.0.0.1"
    with pytest.raises(ValueError, match="AX3L_SEATS_TRUSTED_PROXIES"):
        parse_networks("not-an-ip")
    hosts = HostCheck.from_setting("a.example, b.example:8443")
    assert hosts.host_allowed("127.0.0.1:28873") and hosts.host_allowed("a.example")
    assert hosts.host_allowed("b.example:8443") and not hosts.host_allowed("b.example:80")
    assert not hosts.host_allowed("127.0.0.1.evil:80") and not hosts.host_allowed(None)
    assert not hosts.origin_allowed("null") and hosts.origin_allowed(None)


def test_the_address_table_of_the_rate_limit_is_bounded() -> None:
    now = [0.0]
    buckets = Buckets(1e9, 1.0, clock=lambda: now[0], max_addresses=100)
    for n in range(10_000):
        now[0] += 0.001
        assert buckets.admit_stranger(f"10.0.{n // 256}.{n % 256}") is None
    assert len(buckets.addresses) <= 100
    assert buckets.admit_stranger("10.9.9.9") is None and buckets.admit_stranger("10.9.9.9") is None
    assert buckets.admit_stranger("10.9.9.9") is not None


def test_two_concurrent_adds_of_one_name_leave_one_token(databases: TestDatabases) -> None:
    """Racing adds of one name (the library on two connections, and two ax3l-seats
    processes): exactly one wins, the other is told the seat exists, one row holds the
    winner's token."""
    from ax3l.orchestrator.seats import token_hash

    for round_number in range(4):
        name = f"racer{round_number}"
        start = threading.Barrier(2)
        outcomes: list[str | Exception] = []

        def add(
            name: str = name,
            start: threading.Barrier = start,
            outcomes: list[str | Exception] = outcomes,
        ) -> None:
            conn = databases.connect("ax3l", databases.ax3l_db)
            try:
                start.wait()
                outcomes.append(add_seat(conn, name))
            except SeatError as exc:
                outcomes.append(exc)
            finally:
                conn.close()

        threads = [threading.Thread(target=add) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        tokens = [o for o in outcomes if isinstance(o, str)]
        assert len(tokens) == 1 and len(outcomes) == 2, outcomes
        stored = databases.query(
            "SELECT token_hash FROM seats WHERE name = %s", (name,), database=databases.ax3l_db
        )
        assert stored == [(token_hash(tokens[0]),)]

    env = {**databases.env(), "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-m", "ax3l.orchestrator.seats_cli", "add", "twin"]
    procs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    done = [proc.communicate(timeout=60) for proc in procs]
    codes = sorted(proc.returncode for proc in procs)
    assert codes == [0, 1], done
    printed = [out.decode().strip().splitlines()[-1] for out, _ in done if out]
    stored = databases.query(
        "SELECT token_hash FROM seats WHERE name = 'twin'", database=databases.ax3l_db
    )
    assert stored == [(token_hash(printed[0]),)]


async def test_the_event_writer_caps_an_events_content(databases: TestDatabases) -> None:
    """An event over MAX_CONTENT_BYTES is stored as a marker with its size and head."""
    from ax3l.shared.db.event_log import MAX_CONTENT_BYTES, TRUNCATED_HEAD_CHARS

    db = Database(databases.settings())
    await db.open()
    try:
        log = EventLog(db)
        small = await log.log("seat_call", {"seat": "hal", "values": {"v": "é" * 1000}})
        large = await log.log(
            "seat_call", {"seat": "hal", "values": {"v": "é" * MAX_CONTENT_BYTES}}
        )
    finally:
        await db.close()
    rows = dict(
        databases.query("SELECT event_id, content FROM event_messages", database=databases.ax3l_db)
    )
    assert json.loads(rows[small])["values"]["v"] == "é" * 1000
    marker = json.loads(rows[large])
    assert marker["truncated"] is True and marker["event"] == "seat_call"
    assert marker["bytes"] > 2 * MAX_CONTENT_BYTES and len(marker["head"]) == TRUNCATED_HEAD_CHARS
    assert len(rows[large].encode()) < MAX_CONTENT_BYTES


async def test_the_endpoint_process_shares_the_board_and_is_restarted_when_it_died(
    snakelab_tables: TestDatabases,
) -> None:
    """AX3L_SEATS_PROCESS: the endpoint serves from a child process logged in as its own
    database user (AX3L_SEATS_DB_USER); a turn opened on the orchestrator's board is offered
    there with the payload the orchestrator built, a history between turns is relative to the
    golden the orchestrator sent, a seat's accepted submission wakes the proposer and names the
    winner at the close, its events name the client's address, and a killed endpoint is started
    again at the next turn."""
    import os
    import signal

    from ax3l.orchestrator.seat_process import SeatProcess

    async def read_golden() -> GoldenConfigCreated:
        return golden()

    peer = ScriptedPeer(lambda request: broker_reply(request, {"status": "ok", "run_id": "r-9"}))
    port = free_port()
    with seats_login(snakelab_tables) as (user, password):
        settings = snakelab_tables.settings(
            AX3L_SEATS_PORT=port,
            AX3L_ZMQ_ENDPOINT=peer.endpoint,
            AX3L_SEAT_TOKEN_REFRESH=0.1,
            AX3L_SEATS_DB_USER=user,
            AX3L_SEATS_DB_PASSWORD=password,
        )
        db = await Database(settings).open()
        index = ConfigIndex(db, SCHEMA)
        process = SeatProcess(
            settings, lambda turn: turn_payload(SCHEMA, index, turn), read_golden, log=EventLog(db)
        )
        url = f"http://127.0.0.1:{port}/mcp"
        token = seat(snakelab_tables, "ivy")
        try:
            await process.start()
            first = process.pid()
            assert first is not None and first != os.getpid()
            # L5: the child inherits none of Ax3l's settings or passwords.
            environ = Path(f"/proc/{first}/environ")
            inherited = (await asyncio.to_thread(environ.read_bytes)).split(b"\0")
            names = {item.split(b"=", 1)[0].decode() for item in inherited if item}
            assert not {n for n in names if n.startswith(("AX3L_", "DB_", "SNAKELAB_"))}
            logins = snakelab_tables.query(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (user,)
            )
            assert logins[0][0] >= 1  # the endpoint's pool, as its own user
            log, board = EventLog(db), process.board
            async with httpx2.AsyncClient(timeout=10) as http:
                idle = tool_result(
                    await post(http, url, call_tool(1, "history", {"entry": "gamma"}), token)
                )
                assert idle["structuredContent"]["golden_run_id"] == "golden-1", idle
                turn = await open_turn(log, board, 0)
                shown = await seen_open(http, url, token)
                assert shown["entry"] == "gamma" and shown["open_values"]["text"]
                submit = call_tool(1, "submit_single_value", {"value": 0.95})
                accepted = tool_result(await post(http, url, submit, token=token))
                assert json.loads(accepted["content"][0]["text"])["run_id"] == "r-9"
                await asyncio.wait_for(turn.answered.wait(), 10)
                await process.board.close(turn)
                assert (turn.winner, turn.run_id) == ("ivy", "r-9")

                os.kill(first, signal.SIGKILL)
                await asyncio.sleep(0.5)
                second_turn = await open_turn(log, board, 1)
                for _ in range(200):
                    try:
                        answer = await post(http, url, CURRENT_TURN, token)
                        if answer.status_code == 200 and answer.json()["result"].get(
                            "structuredContent", {}
                        ).get("open"):
                            break
                    except httpx2.HTTPError:
                        pass
                    await asyncio.sleep(0.05)
                else:
                    raise AssertionError("the endpoint was not started again")
                assert process.pid() not in (None, first)
                await process.board.close(second_turn)
        finally:
            await process.stop()
            await db.close()
            peer.close()
        assert process.pid() is None
        rows = snakelab_tables.query(
            "SELECT e.source_name, m.content FROM events e JOIN event_messages m USING (event_id)"
            " WHERE e.name = 'seat_call' ORDER BY e.event_id"
        )
    calls = [(seat, json.loads(content)) for seat, content in rows]
    assert [c["tool"] for _, c in calls] == [
        "history", "current_turn", "submit_single_value", "current_turn"
    ]  # fmt: skip
    assert {(seat, c["client"]) for seat, c in calls} == {("ivy", "127.0.0.1")}
    assert calls[2][1]["outcome"] == "accepted"


def test_the_seats_user_may_read_seats_and_snakelab_and_write_nothing(
    snakelab_tables: TestDatabases,
) -> None:
    """M5: the endpoint's own login reads seats and SnakeLab's tables; it cannot forge an event
    the loop trusts (a ``proposal_accepted`` naming any run, a ``golden_config_created``), nor
    any other event or message, nor change anything: MariaDB itself refuses. The INSERT an
    earlier Ax3l granted it is taken back by ``ax3l-db create``."""
    import pymysql

    databases = snakelab_tables
    with seats_login(databases) as (user, password):
        admin = databases.connect("admin")
        try:
            with admin.cursor() as cur:  # what an earlier Ax3l granted
                for table in ("events", "event_messages"):
                    cur.execute(f"GRANT INSERT ON `{databases.ax3l_db}`.{table} TO '{user}'@'%'")
        finally:
            admin.close()
        ensure_schema(databases.settings(AX3L_SEATS_DB_USER=user))
        conn = mysql_connection(databases.host, databases.port, user, password, databases.ax3l_db)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT name, token_hash FROM seats")
                cur.execute(f"SELECT COUNT(*) FROM `{databases.snakelab_db}`.simulation_runs")
                refused = [
                    "INSERT INTO events (occurred_at, name, category, log_level, process_id)"
                    " VALUES (NOW(), 'proposal_accepted', 'Configuration', 'INFO', 'c-1')",
                    "INSERT INTO events (occurred_at, name, category, log_level)"
                    " VALUES (NOW(), 'golden_config_created', 'Configuration', 'INFO')",
                    "INSERT INTO events (occurred_at, name, category, log_level)"
                    " VALUES (NOW(), 'seat_call', 'Tool', 'INFO')",
                    "INSERT INTO event_messages (event_id, content) VALUES (1, '{}')",
                    "UPDATE events SET name = 'forged'",
                    "DELETE FROM events",
                    "UPDATE event_messages SET content = '{}'",
                    "DELETE FROM event_messages",
                    "SELECT COUNT(*) FROM events",
                    "UPDATE seats SET revoked_at = NULL",
                    "INSERT INTO seats (name, token_hash, created_at) VALUES ('x', 'y', NOW())",
                    "DELETE FROM seats",
                    "INSERT INTO config_index_state (name, last_id) VALUES ('x', 0)",
                    "DELETE FROM config_index_runs",
                    "CREATE TABLE forged (id INT)",
                    "DROP TABLE events",
                    f"DELETE FROM `{databases.snakelab_db}`.simulation_runs",
                    f"UPDATE `{databases.snakelab_db}`.configurations SET seed = 1",
                ]
                for statement in refused:
                    with pytest.raises(pymysql.err.OperationalError) as denied:
                        cur.execute(statement)
                    assert denied.value.args[0] in (1142, 1143), (statement, denied.value)
        finally:
            conn.close()
        assert databases.query("SELECT COUNT(*) FROM events") == [(0,)]
        assert databases.query("SELECT COUNT(*) FROM seats") == [(0,)]


class _Closed:
    def close(self) -> None:
        pass


async def test_the_orchestrator_writes_only_the_seats_own_events_the_endpoint_sends(
    databases: TestDatabases,
) -> None:
    """M5: of what the endpoint's process sends over the board socket, the orchestrator writes
    a seat's call (hung on the open turn it names) and nothing else: a forged
    ``proposal_accepted`` or ``golden_config_created``, an invalid content, a bad level and a
    garbled line are dropped and counted, and the reader goes on."""
    from ax3l.orchestrator.seat_process import SeatProcess

    db = await Database(databases.settings()).open()
    try:
        log = EventLog(db)
        index = ConfigIndex(db, SCHEMA)
        process = SeatProcess(
            databases.settings(), lambda turn: turn_payload(SCHEMA, index, turn), log=log
        )
        turn = await open_turn(log, process.board, 0)
        lines = [
            "not json",
            json.dumps({"event": "proposal_accepted", "content": {"run_id": "r-forged"}}),
            json.dumps({"event": "golden_config_created", "content": {"run_id": "r-forged"}}),
            json.dumps({"event": "seat_call", "content": {"seat": 7}}),
            json.dumps({"event": "seat_call", "content": {"seat": "x"}, "level": "FATAL"}),
            json.dumps(
                {
                    "event": "seat_call",
                    "content": {"seat": "lee", "tool": "current_turn", "checkpoint_event_id": 1000},
                }
            ),
            json.dumps({"event": "seat_call_refused", "content": {"seat": "lee", "tool": "x"}}),
        ]
        reader = asyncio.StreamReader()
        reader.feed_data("".join(line + "\n" for line in lines).encode())
        reader.feed_eof()
        process._stopping = True
        await process._read(reader, _Closed())  # type: ignore[arg-type]
        rows = databases.query(
            "SELECT e.name, e.source_name, e.process_id, e.parameter FROM events e"
            " WHERE e.name <> 'conversation_started' ORDER BY e.event_id"
        )
        assert rows == [
            ("seat_call", "lee", turn.conversation_id, "gamma"),
            ("seat_call_refused", "lee", None, None),
        ]
        assert process.dropped.counts == {
            "malformed": 1,
            "not_a_seat_event": 3,
            "invalid_seat_event": 1,
        }
        # A database that does not answer costs the event, not the reader.
        away = Database(databases.settings(DB_PORT=free_port(), AX3L_DB_ACQUIRE_TIMEOUT=1))
        process.log = EventLog(away)
        reader = asyncio.StreamReader()
        reader.feed_data("".join(line + "\n" for line in lines[-2:]).encode())
        reader.feed_eof()
        await process._read(reader, _Closed())  # type: ignore[arg-type]
        assert process.dropped.counts["seat_event_unwritten"] == 2, process.dropped.counts
    finally:
        await db.close()


async def test_the_endpoint_as_a_service_shares_the_board_over_its_unix_socket(
    snakelab_tables: TestDatabases, tmp_path: Any
) -> None:
    """AX3L_SEATS_BOARD_SOCKET (compose's seats service, make run's with the proposer
    external): the endpoint runs as the stack spec's ``seats`` service, from the environment the
    spec gives it (its own login, not Ax3l's password), and listens on a 0600 unix socket; the
    orchestrator connects, offers a turn and learns its winner; a restarted orchestrator
    connects again; SIGTERM stops the endpoint and removes the socket."""
    import os
    import signal
    import stat

    from ax3l.orchestrator.seat_process import SeatProcess
    from ax3l.shared.stack import spec

    peer = ScriptedPeer(lambda request: broker_reply(request, {"status": "ok", "run_id": "r-7"}))
    port, board_socket = free_port(), str(tmp_path / "board.sock")
    url = f"http://127.0.0.1:{port}/mcp"
    with seats_login(snakelab_tables) as (user, password):
        stack_env = {  # everything a stack knows, Ax3l's login included
            **os.environ,
            **snakelab_tables.env(),
            "AX3L_PROPOSER": "external",
            "AX3L_SEATS_DB_USER": user,
            "AX3L_SEATS_DB_PASSWORD": password,
            "AX3L_SEATS_BOARD_SOCKET": board_socket,
            "AX3L_SEATS_PORT": str(port),
            "AX3L_ZMQ_ENDPOINT": peer.endpoint,
            "AX3L_SEAT_TOKEN_REFRESH": "0.1",
        }
        seats_service = spec.service("seats", stack_env)
        service_env = seats_service.environment(stack_env)
        assert service_env["AX3L_SEATS_DB_PASSWORD"] == password
        assert not {"DB_USER", "DB_PASSWORD"} & set(service_env)
        service = await asyncio.create_subprocess_exec(
            *seats_service.argv(sys.executable), env=service_env
        )
        settings = snakelab_tables.settings(AX3L_SEATS_BOARD_SOCKET=board_socket)
        db = await Database(settings).open()
        index = ConfigIndex(db, SCHEMA)
        token = seat(snakelab_tables, "jay")
        processes: list[SeatProcess] = []
        try:
            log = EventLog(db)
            async with httpx2.AsyncClient(timeout=10) as http:
                for number in range(2):  # an orchestrator, then the one that replaced it
                    process = SeatProcess(
                        settings, lambda turn: turn_payload(SCHEMA, index, turn), log=log
                    )
                    processes.append(process)
                    await process.start()
                    assert process.pid() is None  # nothing of the orchestrator's
                    assert stat.S_IMODE(os.stat(board_socket).st_mode) == 0o600
                    assert await asyncio.to_thread(seats_service.healthy)  # make run's check
                    turn = await open_turn(log, process.board, number)
                    shown = await seen_open(http, url, token)
                    assert shown["checkpoint_event_id"] == 1000 + number
                    submit = call_tool(1, "submit_single_value", {"value": 0.9 + number / 100})
                    accepted = tool_result(await post(http, url, submit, token=token))
                    assert json.loads(accepted["content"][0]["text"])["run_id"] == "r-7"
                    await asyncio.wait_for(turn.answered.wait(), 10)
                    await process.board.close(turn)
                    assert (turn.winner, turn.run_id) == ("jay", "r-7")
                    await process.stop()
        finally:
            for process in processes:
                await process.stop()
            service.send_signal(signal.SIGTERM)
            try:
                code = await asyncio.wait_for(service.wait(), 15)
            finally:
                if service.returncode is None:
                    service.kill()
                    await service.wait()
            await db.close()
            peer.close()
        assert code == 0 and not await asyncio.to_thread(os.path.exists, board_socket)
        rows = snakelab_tables.query(
            "SELECT m.content FROM events e JOIN event_messages m USING (event_id)"
            " WHERE e.name = 'seat_call' AND m.content LIKE '%%accepted%%'"
        )
    assert len(rows) == 2 and all(json.loads(r[0])["client"] == "127.0.0.1" for r in rows)


def test_an_endpoint_reachable_from_elsewhere_needs_its_own_login(databases: TestDatabases) -> None:
    """L5: without AX3L_SEATS_DB_USER the endpoint would use Ax3l's own login: on loopback that
    is a warning, on any other address a refusal that says what to set."""
    from ax3l.orchestrator.seat_process import endpoint_login

    assert endpoint_login(databases.settings()).db_user == databases.ax3l_user
    with pytest.raises(ValueError, match="AX3L_SEATS_DB_USER"):
        endpoint_login(databases.settings(AX3L_SEATS_HOST="0.0.0.0"))
    own = databases.settings(
        AX3L_SEATS_HOST="0.0.0.0", AX3L_SEATS_DB_USER="s", AX3L_SEATS_DB_PASSWORD="p"
    )
    assert endpoint_login(own).db_user == "s"
    # What the orchestrator's child gets: the endpoint's settings alone, none of the loop's.
    child = pickle.loads(pickle.dumps(endpoint_login(own)))
    assert type(child) is SeatsServiceSettings and type(own) is not SeatsServiceSettings
    assert not hasattr(child, "notify_urls") and not hasattr(child, "llm_url")
    assert child.model_dump(exclude={"db_user", "db_password"}) == own.model_dump(
        include=set(SeatsServiceSettings.model_fields) - {"db_user", "db_password"}
    )
    assert child.db_password.get_secret_value() == "p"
