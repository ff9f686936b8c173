"""The adversarial tier (``make test-hostile``, marked ``hostile``): the attacks of a security
review thrown at the running parts, each of which a fix of issue 37 answers (M1-M6):

* a flood of strangers from hundreds of addresses while a seat polls: the seat gets its answers;
* a seat's 64 never-ending ``GET`` streams while another seat submits: the submission goes in;
* 1,000 made-up HTTP methods at the report server run as its image runs it (h11, no httptools):
  the method label stays a fixed set and the server's memory flat;
* a model server answering with deeply nested, huge and binary replies: the loop moves on
  through the fallback, and the event pages render every stored reply;
* a tampered backup given to ``ax3l-db restore``: refused, nothing run or loaded;
* the seats' login, and a forged endpoint on the board socket, trying to write the events the
  loop trusts: refused, dropped.

Everything runs for real on loopback (the stack's processes, the private MariaDB, the client
tools); every flood is bounded and stops by itself.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import random
import secrets
import string
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pymysql
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families
from reports_testing import reports_server

from ax3l.shared.processes import ManagedProcess, http_ok
from ax3l.testing.databases import (
    TestDatabases,
    compare_environment,
    mysql_connection,
    run_module,
    scratch_databases,
    seats_login,
)
from ax3l.testing.mcp_wire import call_tool
from ax3l.testing.plugin import free_port
from ax3l.testing.scripted_llm import completion, tool_call
from ax3l.testing.simple_agent import choose
from ax3l.testing.stack import Proc, Stack

pytestmark = pytest.mark.hostile

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
CURRENT_TURN = json.dumps(call_tool(1, "current_turn", {})).encode()


# -- seats ------------------------------------------------------------------------------------


def add_seat(stack: Stack, name: str) -> str:
    """A new seat's token, as ``ax3l-seats add`` prints it."""
    done = run_module("ax3l.orchestrator.seats_cli", "add", name, env=stack.base_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def start_seats(stack: Stack, **env: str) -> tuple[Proc, str]:
    """An orchestrator with the external proposer (its endpoint its child process, as an
    ``ax3l-orchestrator`` started by hand runs it); it and the endpoint's MCP URL, once the
    endpoint answers."""
    port = free_port()
    proc = stack.orchestrator(
        "external", env={"AX3L_SEATS_PORT": str(port), "AX3L_LLM_FALLBACK": "none", **env}
    )
    url = f"http://127.0.0.1:{port}/mcp"

    def answers() -> bool:
        try:
            return httpx2.post(url, content=b"{}", headers=ACCEPT, timeout=5).status_code == 401
        except httpx2.HTTPError:
            return False

    stack.wait_for(answers, 60, "the seats' endpoint", proc)
    return proc, url


async def poll(http: httpx2.AsyncClient, url: str, token: str | None, address: str) -> int:
    """A ``current_turn`` call's HTTP status, from ``address`` (behind the trusted proxy)."""
    headers = {**ACCEPT, "x-forwarded-for": address}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    try:
        return (await http.post(url, content=CURRENT_TURN, headers=headers)).status_code
    except httpx2.HTTPError:
        return 0


async def current_turn(url: str, token: str) -> dict[str, Any]:
    async with seat_client(url, token) as client:
        result = await client.call_tool("current_turn", {})
    return dict(result.structured_content or {})


@contextlib.asynccontextmanager
async def seat_client(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def open_turn(stack: Stack, url: str, token: str, proc: Proc) -> dict[str, Any]:
    def opened() -> dict[str, Any] | None:
        try:
            turn = asyncio.run(current_turn(url, token))
        except Exception:  # not answering yet
            return None
        return turn if turn.get("open") else None

    return dict(stack.wait_for(opened, 90, "an open turn for the seats", proc))


def test_a_flood_of_strangers_from_many_addresses_leaves_a_seat_its_answers(stack: Stack) -> None:
    """M1: 1,500 token-less requests from 300 addresses (IPv4, and IPv6 from one /48), faster
    than strangers may come all together, while a seat polls from an address the flood uses
    too: the flood meets 429s, and every one of the seat's polls is answered."""
    stack.start()
    token = add_seat(stack, "steady")
    proc, url = start_seats(
        stack, AX3L_SEATS_TRUSTED_PROXIES="127.0.0.1", AX3L_SEATS_RATE_GLOBAL="50"
    )
    addresses = [f"198.51.100.{n}" for n in range(150)]
    addresses += [f"2001:db8:7:{n:x}::1" for n in range(150)]

    async def attack() -> tuple[list[int], list[int]]:
        limits = httpx2.Limits(max_connections=40)
        async with httpx2.AsyncClient(timeout=20, limits=limits) as http:
            pending = [addresses[n % len(addresses)] for n in range(1500)]
            flood: list[int] = []
            seat: list[int] = []

            async def stranger() -> None:
                while pending:
                    flood.append(await poll(http, url, None, pending.pop()))

            async def polls() -> None:
                while pending or len(seat) < 10:
                    seat.append(await poll(http, url, token, addresses[0]))
                    await asyncio.sleep(0.05)

            await asyncio.gather(*(stranger() for _ in range(24)), polls())
            return flood, seat

    flood, seat = asyncio.run(attack())
    assert proc.alive()
    assert flood.count(429) >= 500, sorted(set(flood))
    assert set(flood) <= {401, 429}
    assert len(seat) >= 10 and set(seat) == {200}, seat


async def event_stream(url: str, token: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A ``GET /mcp`` for an event stream, as ``curl -N`` sends it; the connection left open."""
    host = url.split("/")[2]
    reader, writer = await asyncio.open_connection(*host.split(":"))
    writer.write(
        f"GET /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    await writer.drain()
    return reader, writer


def test_a_seats_never_ending_streams_leave_another_seat_its_submission(stack: Stack) -> None:
    """M2: while a turn is open, one seat opens 64 event streams (AX3L_SEATS_MAX_CONNECTIONS)
    and keeps them; another seat's SDK client then takes the turn, its proposal accepted."""
    stack.start()
    greedy, fair = add_seat(stack, "greedy"), add_seat(stack, "fair")
    proc, url = start_seats(stack, AX3L_SEATS_RATE_PER_ADDRESS="100000")
    turn = open_turn(stack, url, fair, proc)

    async def attack() -> tuple[list[int], str]:
        streams, statuses = [], []
        try:
            for _ in range(64):
                streams.append(await event_stream(url, greedy))
                line = await asyncio.wait_for(streams[-1][0].readline(), 20)
                statuses.append(int(line.split()[1]))
            async with seat_client(url, fair) as client:
                values = choose(turn, random.Random(5))
                result = await client.call_tool(turn["tool"], values)
            return statuses, "".join(getattr(block, "text", "") for block in result.content)
        finally:
            for _, writer in streams:
                writer.close()

    statuses, answer = asyncio.run(attack())
    assert json.loads(answer).get("status") == "ok", answer
    assert statuses == [405] * 64
    stack.wait_for(lambda: stack.count("proposal_accepted") >= 1, 30, "the proposal", proc)


# -- the report server ------------------------------------------------------------------------


@contextlib.contextmanager
def report_server_as_imaged(databases: TestDatabases, log: Path) -> Iterator[tuple[str, int]]:
    """``ax3l-reports`` as the image runs it: without httptools, so uvicorn parses with h11,
    which takes any token as a method. Its URL and pid."""
    port = free_port()
    env = {
        **os.environ,
        **databases.env(),
        "AX3L_HTTP_HOST": "127.0.0.1",
        "AX3L_REPORTS_PORT": str(port),
        "AX3L_SNAKELAB_ENDPOINT": f"tcp://127.0.0.1:{free_port()}",
        "AX3L_ORCHESTRATOR_URL": f"http://127.0.0.1:{free_port()}",
    }
    code = (
        "import sys; sys.modules['httptools'] = None\n"  # as in the image: not installed
        "from ax3l.reports.main import main\nsys.exit(main(['--log-level', 'warning']))"
    )
    process = ManagedProcess("ax3l-reports", [sys.executable, "-c", code], env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        process.wait_ready(lambda: http_ok(f"{url}/health"), timeout=30)
        yield url, process.pid
    finally:
        process.stop(10)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


async def raw_method(url: str, method: str, path: str) -> int:
    """One request with ``method`` (whatever token), on a connection of its own; its status."""
    host = url.split("/")[2]
    reader, writer = await asyncio.open_connection(*host.split(":"))
    try:
        writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 20)
        return int(line.split()[1])
    finally:
        writer.close()


def test_made_up_methods_leave_the_report_servers_labels_and_memory_bounded(
    snakelab_tables: TestDatabases, tmp_path: Path
) -> None:
    """M3: 1,000 requests with made-up methods (each an 8 KB token) on a route and off every
    route: each answered 404 or 405, the method label of /metrics stays the standard methods
    and ``other``, /metrics grows by no series, and the server's memory stays flat."""
    rng = random.Random(11)
    with report_server_as_imaged(snakelab_tables, tmp_path / "reports.log") as (url, pid):

        async def send(methods: list[str]) -> list[int]:
            window = asyncio.Semaphore(16)

            async def one(number: int, method: str) -> int:
                async with window:
                    return await raw_method(url, method, "/health" if number % 2 else "/nowhere")

            return await asyncio.gather(*(one(n, m) for n, m in enumerate(methods)))

        asyncio.run(send(["GET", "POST", "PUT", "DELETE", "OTHER"] * 40))  # every series there
        before_series = len(httpx.get(f"{url}/metrics").text.splitlines())
        before = rss_kib(pid)
        methods = [
            f"M{n:04d}" + "".join(rng.choice(string.ascii_uppercase) for _ in range(8000))
            for n in range(1000)
        ]
        statuses = asyncio.run(send(methods))
        after = rss_kib(pid)
        text = httpx.get(f"{url}/metrics").text
    assert set(statuses) <= {404, 405}
    labels = {
        sample.labels["method"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if family.name == "ax3l_http_request_seconds"
    }
    assert labels <= {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "other"}
    assert len(text.splitlines()) <= before_series + 20  # the timings of /metrics itself
    assert after - before < 4 * 1024, f"RSS grew by {after - before} KiB"


# -- the model ----------------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def hostile_replies() -> list[dict[str, Any]]:
    """Replies a compromised or broken model server could send, as scripted behaviours: a tool
    call whose arguments nest 100,000 deep, a well-formed call in a 1.2 MB reply, and bytes."""
    deep = completion(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [tool_call("submit_single_value", '{"value": ' + DEEP + "}")],
        },
        "tool_calls",
    )
    huge = completion(
        {
            "role": "assistant",
            "content": "x" * 1_200_000,
            "tool_calls": [tool_call("submit_single_value", {"value": 240})],
        },
        "tool_calls",
    )
    binary = base64.b64encode(bytes(range(256)) * 64).decode()
    nested_body = '{"choices": [], "x": ' + DEEP + "}"
    return [
        {"raw": json.dumps(deep)},
        {"raw": json.dumps(huge)},
        {"raw_base64": binary},
        {"raw": nested_body},
    ]


def test_a_model_answering_hostile_replies_is_taken_over_by_the_fallback(
    stack: Stack, tmp_path: Path
) -> None:
    """M6: each hostile reply ends its conversation as an invalid reply (counted, never a
    step retried for ever), so after AX3L_LLM_FALLBACK_AFTER of them TPE takes the turn and
    its proposal is accepted; the report server then renders the event list, each stored
    reply's and failure's page, and the API."""
    stack.start()
    replies = hostile_replies()
    model = stack.start_model({"replies": replies[:3], "then": replies[3]})
    proc = stack.orchestrator("llm", url=model.url, env={"AX3L_LLM_FALLBACK_AFTER": "3"})

    def taken_over() -> bool:  # the accepted conversation ended (its proposal alone comes first)
        started = stack.events("conversation_started")
        ended = stack.events("conversation_ended")
        return any(e.get("fallback_for") == "llm" for e in started) and any(
            e.get("outcome") == "accepted" for e in ended
        )

    stack.wait_for(taken_over, 90, "the fallback taking the turn", proc)
    proc.stop()
    failures = [e.get("kind") for e in stack.events("llm_request_failed")]
    assert failures[:3] == ["invalid_reply"] * 3, failures
    ended = [e for e in stack.events("conversation_ended") if e.get("outcome") == "accepted"]
    started = {e.process_id: e for e in stack.events("conversation_started")}
    assert ended and started[ended[0].process_id].get("fallback_for") == "llm"
    shown = [e.event_id for e in stack.events("reply_received", "llm_request_failed")]
    with reports_server(stack.databases, tmp_path / "reports.log") as server:
        paths = ["/events", "/api/events?limit=500", "/events?event=reply_received"]
        paths += [f"/events/{event_id}" for event_id in shown]
        for path in paths:
            answer = httpx.get(server.url + path, timeout=30)
            assert answer.status_code == 200, (path, answer.text[:300])


# -- backups --------------------------------------------------------------------------------------


def test_a_tampered_backup_is_refused_by_ax3l_db_restore(
    db_env: dict[str, str], tmp_path: Path
) -> None:
    """M4: a backup taken by ``ax3l-db backup``, then given a shell command, a ``use mysql``,
    a grant and a root trigger (its sandbox line dropped and its manifest made to match), is
    refused by ``ax3l-db restore --replace``: exit 1, nothing run, no user or trigger made,
    the target's rows as they were."""
    ran = tmp_path / "ran"
    mark = f"pwn{secrets.token_hex(4)}"
    with (
        scratch_databases(db_env, prefix="hs", with_snakelab_tables=True) as source,
        scratch_databases(db_env, prefix="ht", with_snakelab_tables=True) as target,
    ):
        source.query(
            "INSERT INTO events (occurred_at, name, category, log_level) VALUES"
            " (NOW(6), 'prompt_sent', 'Conversation', 'INFO')"
        )
        target.query(
            "INSERT INTO events (occurred_at, name, category, log_level) VALUES"
            " (NOW(6), 'kept', 'Conversation', 'INFO')"
        )
        saved = tmp_path / "backup"

        def ax3l_db(databases: TestDatabases, *args: str) -> subprocess.CompletedProcess[str]:
            env = compare_environment(databases, db_env)
            env["AX3L_ORCHESTRATOR_PORT"] = str(free_port())
            env["AX3L_RUN_DIR"] = str(tmp_path / "run")
            return run_module("ax3l.shared.db.cli", *args, env=env)

        done = ax3l_db(source, "backup", str(saved))
        assert done.returncode == 0, done.stderr
        dump = saved / "dump.sql"
        use = f"USE `{source.ax3l_db}`;\n"
        attack = (
            f"\\! touch {ran}\nuse mysql;\nGRANT ALL ON *.* TO '{mark}'@'%' IDENTIFIED BY 'x';\n"
            f"/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER {mark}"
            " BEFORE INSERT ON events FOR EACH ROW SET NEW.name = NEW.name */;\n"
        )
        lines = dump.read_text().replace(use, use + attack, 1).splitlines(keepends=True)
        dump.write_text("".join(line for line in lines if "sandbox mode" not in line))
        manifest = json.loads((saved / "manifest.json").read_text())
        manifest["dump"]["bytes"] = dump.stat().st_size
        manifest["dump"]["sha256"] = subprocess.run(
            ["sha256sum", str(dump)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
        (saved / "manifest.json").write_text(json.dumps(manifest))
        try:
            refused = ax3l_db(target, "restore", "--replace", str(saved))
            assert not ran.exists(), "the backup's shell command ran"
            assert refused.returncode == 1, refused.stdout + refused.stderr
            assert "restore only backups you made" in refused.stderr
            assert target.query("SELECT name FROM events") == [("kept",)]
            admin = db_env["AX3L_DB_ADMIN_USER"], db_env["AX3L_DB_ADMIN_PASSWORD"]
            conn = mysql_connection(db_env["DB_HOST"], int(db_env["DB_PORT"]), *admin, None)
            with contextlib.closing(conn), conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM mysql.user WHERE user = %s", (mark,))
                assert cur.fetchone() == (0,)
                cur.execute("SELECT COUNT(*) FROM information_schema.triggers")
                assert cur.fetchone() == (0,)
        finally:
            conn = mysql_connection(
                db_env["DB_HOST"],
                int(db_env["DB_PORT"]),
                db_env["AX3L_DB_ADMIN_USER"],
                db_env["AX3L_DB_ADMIN_PASSWORD"],
                None,
            )
            with contextlib.closing(conn), conn.cursor() as cur:
                cur.execute(f"DROP USER IF EXISTS '{mark}'@'%'")
                cur.execute(f"DROP TRIGGER IF EXISTS `{target.ax3l_db}`.{mark}")


# -- the events the loop trusts ----------------------------------------------------------------


def test_the_seats_login_and_a_forged_endpoint_cannot_write_the_events_the_loop_trusts(
    stack: Stack, tmp_path: Path
) -> None:
    """M5: logged in as the seats' endpoint, a ``proposal_accepted`` naming any run and a
    ``golden_config_created`` are refused by MariaDB; and a forged endpoint on the board socket
    (the orchestrator connects to it, as to compose's seats service) that sends those events
    gets none of them written, while its seat's own call is."""
    stack.start()
    with seats_login(stack.databases) as (user, password):
        conn = mysql_connection(
            stack.databases.host, stack.databases.port, user, password, stack.databases.ax3l_db
        )
        with contextlib.closing(conn), conn.cursor() as cur:
            for name in ("proposal_accepted", "golden_config_created"):
                with pytest.raises(pymysql.err.OperationalError) as denied:
                    cur.execute(
                        "INSERT INTO events (occurred_at, name, category, log_level)"
                        " VALUES (NOW(), %s, 'Configuration', 'INFO')",
                        (name,),
                    )
                assert denied.value.args[0] == 1142, name
    board = tmp_path / "board.sock"
    forged = [
        {"event": "proposal_accepted", "content": {"run_id": "forged", "parameter": "gamma"}},
        {"event": "golden_config_created", "content": {"run_id": "forged", "high_score": 999}},
        {"event": "seat_call", "content": {"seat": "mallory", "tool": "history"}},
    ]

    async def forged_endpoint() -> None:
        writers: list[asyncio.StreamWriter] = []

        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            await reader.readline()  # the orchestrator's hello
            writer.write(b'{"ready": true}\n')
            for message in forged:
                writer.write(json.dumps(message).encode() + b"\n")
            await writer.drain()
            while line := await reader.readline():  # close each turn it opens at once
                message = json.loads(line)
                if message.get("op") == "close":
                    closed = {"closed": message["checkpoint_event_id"]}
                    writer.write(json.dumps(closed).encode() + b"\n")
                    await writer.drain()

        server = await asyncio.start_unix_server(connected, path=str(board))
        async with server:
            # The orchestrator writes what it is sent in its own time: wait for its row.
            await asyncio.to_thread(
                stack.wait_for, lambda: stack.count("seat_call") >= 1, 60, "the seat's call", proc
            )
            for writer in writers:
                writer.close()
                await writer.wait_closed()

    proc = stack.orchestrator(
        "external",
        env={
            "AX3L_SEATS_BOARD_SOCKET": str(board),
            "AX3L_LLM_FALLBACK": "none",
            "AX3L_SEATS_PORT": str(free_port()),
        },
    )
    asyncio.run(forged_endpoint())
    proc.stop()
    (call,) = stack.events("seat_call")
    assert call.source_name == "mallory"
    assert not [e for e in stack.events("proposal_accepted") if e.get("run_id") == "forged"]
    assert not [e for e in stack.events("golden_config_created") if e.get("run_id") == "forged"]
