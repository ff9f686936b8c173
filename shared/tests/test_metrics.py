"""``/metrics``: Prometheus text from a real app on a real database, request timing by route."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db.database import Database
from ax3l.shared.metrics import SNAKELAB_RUNS, RunsByStatus, add_metrics
from ax3l.testing.databases import TestDatabases
from ax3l.testing.snakelab_rows import insert_runs


class _Resources:
    def __init__(self, db: Database) -> None:
        self.db = db


def _samples(text: str, service: str) -> dict[tuple[str, str], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("service") == service:
                key = (
                    sample.name,
                    sample.labels.get("route", "") + sample.labels.get("status", ""),
                )
                found[key] = sample.value
    return found


async def test_metrics_time_routes_and_say_whether_the_database_answers(
    snakelab_tables: TestDatabases,
) -> None:
    """Requests are timed under their route's template (a path no route has as ``unmatched``,
    ``/metrics`` itself not at all); ``ax3l_database_up`` is 1 for a database that answers and
    0 for one that does not; the runs by status are SnakeLab's counts."""
    schema = cached_schema()
    dbs, config = snakelab_tables, schema.default_config()
    insert_runs(dbs, schema, config, config, database=dbs.snakelab_db)
    insert_runs(dbs, schema, config, status="failed", database=dbs.snakelab_db)
    app = FastAPI()

    @app.get("/runs/{run_id}")
    async def run(run_id: str) -> dict[str, str]:
        return {"run_id": run_id}

    add_metrics(app, "test-a")
    async with Database(snakelab_tables.settings()) as db:
        app.state.resources = _Resources(db)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for run_id in ("a", "b"):
                assert (await client.get(f"/runs/{run_id}")).status_code == 200
            assert (await client.get("/nothing")).status_code == 404
            response = await client.get("/metrics")
            await client.get("/metrics")
        counter = RunsByStatus()
        await counter.refresh(db)
        counted = {
            s: SNAKELAB_RUNS.labels(s)._value.get() for s in ("completed", "failed", "queued")
        }
        # A run that ends moves between counts; one still queued keeps the later ones unsettled.
        (queued,) = insert_runs(dbs, schema, config, status="queued", database=dbs.snakelab_db)
        insert_runs(dbs, schema, config, database=dbs.snakelab_db)
        await counter.refresh(db)
        after_queue = {s: SNAKELAB_RUNS.labels(s)._value.get() for s in ("completed", "queued")}
        dbs.query(
            "UPDATE simulation_runs SET status = 'failed' WHERE run_id = %s",
            (queued,),
            user="snakelab",
        )
        await counter.refresh(db)
        await counter.refresh(db)
    assert response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text, "test-a")
    assert samples[("ax3l_http_request_seconds_count", "/runs/{run_id}200")] == 2
    assert samples[("ax3l_http_request_seconds_count", "unmatched404")] == 1
    assert not any("/metrics" in route for _, route in samples)
    assert samples[("ax3l_database_up", "")] == 1
    assert counted == {"completed": 2, "failed": 1, "queued": 0}
    assert after_queue == {"completed": 3, "queued": 1}
    assert SNAKELAB_RUNS.labels("completed")._value.get() == 3
    assert SNAKELAB_RUNS.labels("failed")._value.get() == 2
    assert SNAKELAB_RUNS.labels("queued")._value.get() == 0
    assert counter.settled_through == len(
        dbs.query("SELECT id FROM simulation_runs", user="snakelab")
    )

    down = FastAPI()
    add_metrics(down, "test-b")
    unreachable = Database(snakelab_tables.settings(DB_PORT=1, AX3L_DB_ACQUIRE_TIMEOUT=1))
    down.state.resources = _Resources(unreachable)
    transport = httpx.ASGITransport(app=down)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        text = (await client.get("/metrics")).text
    await unreachable.close()
    assert _samples(text, "test-b")[("ax3l_database_up", "")] == 0


def test_every_metric_is_documented_and_the_dashboard_uses_only_real_names() -> None:
    """The metrics table of docs/operations.md ("Metrics") lists each metric Ax3l registers, and
    every name the Grafana dashboard queries is one of them."""
    import json
    import re
    from pathlib import Path

    from prometheus_client import REGISTRY

    repo = Path(__file__).resolve().parents[2]
    ours = {
        sample_name
        for family in REGISTRY.collect()
        if family.name.startswith("ax3l_")
        for sample_name in (family.name + "_total" if family.type == "counter" else family.name,)
    }
    page = (repo / "docs" / "operations.md").read_text()
    documented = set(re.findall(r"^\| `(ax3l_\w+)` \|", page, flags=re.MULTILINE))
    assert documented == ours
    dashboard = json.loads((repo / "deploy/monitoring/grafana-dashboard.json").read_text())
    queried = {
        re.sub(r"_(bucket|count|sum)$", "", name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"ax3l_\w+", target["expr"])
    }
    assert queried and queried <= ours
