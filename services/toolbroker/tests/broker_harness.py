"""Helpers of the toolbroker suite (imported by its conftest and tests): SnakeLab's tables,
raw tool-channel requests, an in-process broker and a scripted SnakeLab stand-in.

One reference SnakeLab serves a whole test module (its start costs more than most tests);
each test gets fresh Ax3l databases and a golden configuration on its own seed, so runs of
earlier tests never equal its candidates.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pymysql
import zmq
import zmq.asyncio
from mcp import Client, StdioServerParameters

from ax3l.shared.config_schema import load_schema
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog, HighscoreRow
from ax3l.shared.event_models import GoldenConfigCreated, RoundRobinCheckpoint
from ax3l.shared.registry import BY_NAME, PARAMETER_ORDER
from ax3l.testing.databases import TestDatabases
from ax3l.testing.plugin import free_port
from ax3l.testing.snakelab_rows import insert_runs
from ax3l.testing.zmq_peer import ScriptedPeer, snakelab_reply
from ax3l.toolbroker.main import Broker

SCHEMA = load_schema()
_seeds = itertools.count(3000)


def next_seed() -> int:
    """A seed no other test of this process uses: its runs are never another test's."""
    return next(_seeds)


@dataclass
class Lab:
    """The module's SnakeLab (endpoint and database) seen from one test's databases."""

    endpoint: str
    db_name: str
    dbs: TestDatabases

    def settings_overrides(self) -> dict[str, str]:
        return {"AX3L_SNAKELAB_ENDPOINT": self.endpoint, "AX3L_SNAKELAB_DB_NAME": self.db_name}

    def env(self) -> dict[str, str]:
        """Environment for an Ax3l subprocess using this test's databases and this SnakeLab."""
        return {**self.dbs.env(), **self.settings_overrides()}

    def _connect(self) -> Any:
        return self.dbs.connect("snakelab", self.db_name)

    def insert_run(
        self, config: dict[str, Any], status: str = "completed", version: str = "2.1.0"
    ) -> str:
        """A run written straight into SnakeLab's tables, as another writer would."""
        (run_id,) = insert_runs(
            self.dbs, SCHEMA, config, database=self.db_name, status=status, version=version
        )
        return run_id

    def _query(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        return self.dbs.query(sql, args, user="snakelab", database=self.db_name)

    def run_count(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM simulation_runs")[0][0])

    def runs_with_seed(self, seed: int) -> list[str]:
        return [
            row[0]
            for row in self._query("SELECT run_id FROM configurations WHERE seed = %s", (seed,))
        ]

    def stored_config(self, run_id: str) -> dict[str, Any]:
        conn = self._connect()
        try:
            with conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute("SELECT * FROM configurations WHERE run_id = %s", (run_id,))
                row = cur.fetchone()
        finally:
            conn.close()
        row.pop("run_id")
        return SCHEMA.unflatten(row)


async def write_golden(dbs: TestDatabases, run_id: str, config: dict[str, Any]) -> int:
    """Log ``golden_config_created`` for ``run_id`` as the orchestrator does after seeding."""
    async with Database(dbs.settings()) as db:
        golden = GoldenConfigCreated(
            run_id=run_id,
            config=config,
            high_score=38,
            seed=config["seed"],
            simulations=1,
            reason="initial configuration",
        )
        return await EventLog(db).log(
            golden,
            process_id=run_id,
            highscore=HighscoreRow(1, 38, config["seed"]),
        )


async def log_checkpoint(log: EventLog, parameter: str) -> int:
    """Log the ``round_robin_checkpoint`` the orchestrator writes before ``parameter``'s turn."""
    checkpoint = RoundRobinCheckpoint(
        parameter_order=list(PARAMETER_ORDER), index=PARAMETER_ORDER.index(parameter)
    )
    return await log.log(
        checkpoint,
        parameter=parameter,
        source_name="RoundRobin",
        process_id=str(uuid.uuid4()),
    )


async def open_turn(dbs: TestDatabases, parameter: str) -> int:
    """Open ``parameter``'s round-robin turn (a fresh checkpoint); returns its event id."""
    async with Database(dbs.settings()) as db:
        return await log_checkpoint(EventLog(db), parameter)


def sql(dbs: TestDatabases, query: str, args: Any = None) -> list[Any]:
    """Rows of ``query`` run as admin on the test's ax3l database."""
    return dbs.query(query, args)


def event_names(dbs: TestDatabases) -> list[str]:
    return [row[0] for row in sql(dbs, "SELECT name FROM events ORDER BY event_id")]


def events(dbs: TestDatabases, *names: str) -> list[dict[str, Any]]:
    """Events called ``names`` (oldest first) with their decoded content."""
    marks = ", ".join(["%s"] * len(names))
    rows = sql(
        dbs,
        "SELECT e.event_id, e.name, e.process_id, e.parent_event_id, e.parameter,"
        " e.source_name, e.log_level, m.content FROM events e"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id"
        f" WHERE e.name IN ({marks}) ORDER BY e.event_id",
        names,
    )
    keys = ("event_id", "name", "process_id", "parent_event_id", "parameter", "source_name")
    found = []
    for row in rows:
        item = dict(zip((*keys, "log_level"), row[:7], strict=True))
        item["content"] = json.loads(row[7]) if row[7] else None
        found.append(item)
    return found


async def send_raw(endpoint: str, raw: bytes | list[bytes], wait: float = 10.0) -> dict[str, Any]:
    """One raw request on a fresh REQ socket; the decoded reply envelope."""
    context = zmq.asyncio.Context.instance()
    sock = context.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(endpoint)
        if isinstance(raw, list):
            await sock.send_multipart(raw)
        else:
            await sock.send(raw)
        reply: dict[str, Any] = json.loads(await asyncio.wait_for(sock.recv(), wait))
        return reply
    finally:
        sock.close(linger=0)


def request_message(method: str, payload: Any, **fields: Any) -> dict[str, Any]:
    """A tool's request envelope, as the MCP server sends it (``fields`` added or replaced)."""
    return {
        "protocol_version": 1,
        "sender": "mcp-snakelab",
        "target": "snakelab",
        "method": method,
        "payload": payload,
        **fields,
    }


def envelope(method: str, payload: Any, **fields: Any) -> bytes:
    return json.dumps(request_message(method, payload, **fields)).encode()


class RunningBroker:
    """An in-process broker serving on a real ZeroMQ socket.

    ``single`` and ``pair`` first open a fresh turn for their entry, as the orchestrator does
    before each conversation (``open_turn=False`` submits into whatever turn is live).
    """

    def __init__(self, broker: Broker, endpoint: str):
        self.broker = broker
        self.endpoint = endpoint

    async def send_raw(self, raw: bytes | list[bytes]) -> dict[str, Any]:
        return await send_raw(self.endpoint, raw)

    async def request(self, method: str, payload: Any, **fields: Any) -> dict[str, Any]:
        return await self.send_raw(envelope(method, payload, **fields))

    async def open_turn(self, parameter: str) -> int:
        """A fresh checkpoint for ``parameter``'s turn; returns its event id."""
        return await log_checkpoint(self.broker.log, parameter)

    async def _maybe_open(self, name: str, open_turn: bool) -> None:
        if open_turn and name in BY_NAME:
            await self.open_turn(name)

    async def single(self, parameter: str, value: Any, open_turn: bool = True) -> dict[str, Any]:
        await self._maybe_open(parameter, open_turn)
        reply = await self.request("submit_single_value", {"parameter": parameter, "value": value})
        payload: dict[str, Any] = reply["payload"]
        return payload

    async def pair(
        self, pair: str, value_1: Any, value_2: Any, open_turn: bool = True
    ) -> dict[str, Any]:
        await self._maybe_open(pair, open_turn)
        payload = {"pair": pair, "value_1": value_1, "value_2": value_2}
        reply: dict[str, Any] = (await self.request("submit_pair_values", payload))["payload"]
        return reply


@contextlib.asynccontextmanager
async def running_broker(
    dbs: TestDatabases, snakelab_endpoint: str, snakelab_db: str, **overrides: Any
) -> AsyncIterator[RunningBroker]:
    """A broker task in the current event loop; cancelled and closed on exit."""
    settings = dbs.settings(
        AX3L_SNAKELAB_ENDPOINT=snakelab_endpoint, AX3L_SNAKELAB_DB_NAME=snakelab_db, **overrides
    )
    broker = Broker(settings, f"tcp://127.0.0.1:{free_port()}", schema=SCHEMA)
    endpoint = await broker.start()
    task = asyncio.create_task(broker.serve())
    try:
        yield RunningBroker(broker, endpoint)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await broker.close()


@contextlib.asynccontextmanager
async def mcp_session(
    parameter: str | None, endpoint: str, wait: str = "15"
) -> AsyncIterator[Client]:
    """A real ``python -m ax3l.app.snakelab.tools`` stdio child with the environment
    ``scripts/generate-mcp-config.py`` writes (binding and endpoint), plus the timeout."""
    env = {"AX3L_ZMQ_ENDPOINT": endpoint, "AX3L_ZMQ_TIMEOUT": wait}
    if parameter is not None:
        env["AX3L_CONVERSATION_PARAMETER"] = parameter
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "ax3l.app.snakelab.tools"], env=env
    )
    async with Client(server) as client:
        yield client


def text_of(result: Any) -> str:
    """The one text block of an MCP tool result."""
    (content,) = result.content
    text: str = content.text
    return text


class ScriptedSnakeLab(ScriptedPeer):
    """A stand-in SnakeLab endpoint that records requests (``received``) and answers each
    with ``reply`` (or never, when ``reply`` is None): for failures the reference server
    cannot produce."""

    def __init__(self, reply: dict[str, Any] | None = None):
        self.reply = reply
        super().__init__(self._answer)
        self.received = self.requests

    def _answer(self, request: dict[str, Any]) -> dict[str, Any] | None:
        return None if self.reply is None else snakelab_reply(request, self.reply)


@contextlib.asynccontextmanager
async def broker_on(
    snakelab: ScriptedPeer, dbs: TestDatabases, lab: Lab, **overrides: Any
) -> AsyncIterator[RunningBroker]:
    """``running_broker`` whose SnakeLab is the stand-in ``snakelab`` (closed with the broker),
    its tables the module SnakeLab's."""
    try:
        async with running_broker(dbs, snakelab.endpoint, lab.db_name, **overrides) as broker:
            yield broker
    finally:
        await asyncio.to_thread(snakelab.close)
