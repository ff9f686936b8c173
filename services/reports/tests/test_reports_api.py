"""The JSON API beyond the event log, over the user's real runs and the replayed history."""

from __future__ import annotations

import re
import statistics

from stored_rows import stored_rows

from ax3l.shared.registry import PARAMETER_ORDER


def _cycle_events(experiment):
    return stored_rows(
        experiment.dbs,
        "SELECT e.event_id, e.name, m.content FROM events e"
        " LEFT JOIN event_messages m ON m.event_id = e.event_id ORDER BY e.event_id",
    )


async def test_status_reports_the_experiment(client, experiment):
    """Golden and all-time high scores, run count, seed and cycles come from the history."""
    status = (await client.get("/api/status")).json()
    _, golden_run, golden_sims = experiment.replay.goldens[-1]
    assert status["golden_high_score"] == golden_run.high_score
    assert status["all_time_high_score"] == max(
        r.high_score for _, r, _ in experiment.replay.goldens
    )
    assert status["all_time_high_score"] > status["golden_high_score"]  # seeds rotated since
    assert status["simulations_submitted"] == len(experiment.runs)
    assert status["current_seed"] == golden_run.seed == 1972
    assert status["golden"]["run_id"] == golden_run.run_id
    assert status["golden"]["simulations"] == golden_sims
    # What any counting rule must give this history (a cycle is seven compared steps); the
    # rule itself: test_status_counts_cycles_as_the_spec_says below.
    compared = sum(
        1 for _, name, _ in _cycle_events(experiment) if name == "configuration_compared"
    )
    assert 10 < status["experiment_cycles"] <= compared // 7
    assert 0 <= status["stagnant_cycles"] <= status["experiment_cycles"]
    # Nothing listens on the configured control endpoint.
    assert status["snakelab"]["state"] == "unavailable"
    assert status["snakelab"]["label"] == "Service Unavailable"


async def test_highscores_are_the_table_rows_with_run_and_reason(client, experiment):
    """/api/highscores lists every experiment_highscores row with its event's run and reason."""
    found = (await client.get("/api/highscores")).json()
    assert found["current_simulations"] == len(experiment.runs)
    expected = [
        (event, run.run_id, sims, run.high_score, run.seed)
        for event, run, sims in experiment.replay.goldens
    ]
    got = [
        (p["event_id"], p["run_id"], p["simulations"], p["score"], p["seed"])
        for p in found["points"]
    ]
    assert got == expected
    assert found["points"][0]["reason"].startswith("Initial configuration")
    assert found["points"][-1]["reason"].startswith("High score: ")


async def test_golden_configurations_show_what_changed(client, experiment):
    """Each golden lists its changes from the previous one; the first has none to compare."""
    found = (await client.get("/api/golden-configurations", params={"limit": 500})).json()
    goldens = found["configurations"]
    assert [g["event_id"] for g in goldens] == [
        e for e, _, _ in reversed(experiment.replay.goldens)
    ]
    assert goldens[-1]["changes"] is None
    rotation = next(g for g in goldens if g["reason"] == "Fresh baseline for seed 1971.")
    assert [(c["path"], c["before"], c["after"]) for c in rotation["changes"]] == [
        ("seed", 1970, 1971)
    ]
    for golden in goldens[:-1]:
        if golden["reason"].startswith("High score"):
            assert golden["changes"], golden
            assert all(c["path"] in golden["reason"] for c in golden["changes"])


async def test_golden_pages_chain_without_losing_a_change(client, experiment):
    """Paging golden configurations keeps every entry's change, across the page boundary."""
    everything = (await client.get("/api/golden-configurations", params={"limit": 500})).json()
    first = (await client.get("/api/golden-configurations", params={"limit": 4})).json()
    second = (
        await client.get(
            "/api/golden-configurations", params={"limit": 4, "before": first["older_before"]}
        )
    ).json()
    assert first["configurations"] + second["configurations"] == everything["configurations"][:8]


async def test_score_distribution_matches_the_runs(client, experiment):
    """The histogram counts every completed run's score; filters by seed and status."""
    found = (await client.get("/api/score-distribution")).json()
    completed = [r.high_score for r in experiment.runs if r.status == "completed"]
    assert found["runs"] == len(completed)
    assert {b["score"]: b["runs"] for b in found["bins"]} == {
        s: completed.count(s) for s in set(completed)
    }
    assert found["median"] == statistics.median(completed)
    assert abs(found["mean"] - statistics.mean(completed)) < 1e-9
    seeded = (await client.get("/api/score-distribution", params={"seed": 1971})).json()
    assert seeded["runs"] == sum(1 for r in experiment.runs if r.seed == 1971)
    running = (await client.get("/api/score-distribution", params={"status": "running"})).json()
    assert running["runs"] == 1
    every = (await client.get("/api/score-distribution", params={"status": ""})).json()
    assert every["runs"] == len(experiment.runs)
    bad = await client.get("/api/score-distribution", params={"status": "exploded"})
    assert bad.status_code == 422 and "status" in bad.json()["message"]


async def test_simulation_has_config_snapshot_episodes_and_events(client, experiment):
    """A run's API shows its row, nested config, snapshot, episodes and its Ax3l events."""
    run = experiment.runs[0]
    found = (await client.get(f"/api/simulations/{run.run_id}")).json()
    assert found["run"]["status"] == "completed" and found["run"]["high_score"] == run.high_score
    assert found["config"]["model"]["hidden_size"] == run.flat["model_hidden_size"]
    assert found["config"]["training"]["learning_rate"] == run.flat["training_learning_rate"]
    assert found["snapshot"]["board"]["score"] == run.high_score
    assert len(found["episodes"]) == 1500
    assert {e["name"] for e in found["events"]} >= {"simulation_submitted", "golden_config_created"}


async def test_unknown_or_malformed_run_ids(client):
    """An unknown run is a 404; a run id with other characters or too long is a 422."""
    missing = await client.get("/api/simulations/00000000-0000-4000-8000-000000000000")
    assert missing.status_code == 404 and "no run" in missing.json()["message"]
    assert (
        await client.get("/simulations/00000000-0000-4000-8000-000000000000")
    ).status_code == 404
    assert (await client.get("/api/simulations/abc'def")).status_code == 422
    assert (await client.get("/api/simulations/" + "a" * 37)).status_code == 422


async def test_running_run_has_no_board_yet(client, experiment):
    """The running run's page says there is no snapshot instead of drawing one."""
    page = (await client.get(f"/simulations/{experiment.runs[-1].run_id}")).text
    assert 'id="no-board"' in page and 'id="board"' not in page


async def test_proposers_are_compared(client, experiment):
    """Proposals are attributed to the proposer their conversation or content names."""
    found = (await client.get("/api/proposers")).json()
    assert found["compared"] is True
    by_name = {p["proposer"]: p for p in found["proposers"]}
    assert set(by_name) == {"llm", "tpe"}
    for name, proposals in experiment.replay.proposers.items():
        assert by_name[name]["proposals"] == proposals
        assert by_name[name]["conversations"] == experiment.replay.conversations[name]
    promoted = sum(p["new_goldens"] for p in found["proposers"])
    # Every golden but the initial one and the two seed baselines came from a proposal.
    assert promoted == len(experiment.replay.goldens) - 3
    page = (await client.get("/proposers")).text
    assert 'data-proposer="llm"' in page and 'data-proposer="tpe"' in page


async def test_plotly_is_served_by_the_service(client):
    """plotly.js (the strict bundle: no eval, so WebGL plots draw under the CSP) comes from this
    server, gzipped on request; pages link it versioned, cached for a year; only plot pages
    load it, and the dashboard (one SVG plot) the basic bundle, a quarter of the size."""
    plain = await client.get("/static/plotly.min.js", headers={"accept-encoding": "identity"})
    assert plain.status_code == 200 and b"plotly.js (strict" in plain.content[:2000]
    assert plain.headers["cache-control"] == "public, max-age=86400"
    packed = await client.get("/static/plotly.min.js", headers={"accept-encoding": "gzip"})
    assert packed.headers["content-encoding"] == "gzip"
    assert int(packed.headers["content-length"]) < len(plain.content) / 2
    assert packed.content == plain.content  # httpx decodes: the same file
    again = await client.get(
        "/static/plotly.min.js", headers={"if-none-match": plain.headers["etag"]}
    )
    assert again.status_code == 304
    page = (await client.get("/experiment-highscores")).text
    source = re.search(r'<script src="(/static/plotly\.min\.js\?v=[0-9a-f]{12})"></script>', page)
    assert source is not None
    assert "cdn" not in page.lower() and "https://" not in page
    versioned = await client.get(source.group(1))
    assert versioned.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert versioned.headers["etag"] == plain.headers["etag"]
    for path in ("/plots/slice", "/plots/history", "/plots/parallel?interactive=true"):
        assert source.group(1) in (await client.get(path)).text, path
    dashboard = (await client.get("/")).text
    assert source.group(1) not in dashboard
    # SVG-only pages load the basic bundle: the dashboard, the quick parallel coordinates.
    assert source.group(1) not in (await client.get("/plots/parallel")).text
    basic = re.search(
        r'<script src="(/static/plotly-basic\.min\.js\?v=[0-9a-f]{12})"></script>', dashboard
    )
    assert basic is not None
    small = await client.get(basic.group(1), headers={"accept-encoding": "identity"})
    assert b"plotly.js (basic" in small.content[:2000]
    assert b"new Function" not in small.content and b"eval(" not in small.content
    assert len(small.content) < len(plain.content) / 3
    assert small.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert basic.group(1) in (await client.get("/plots/parallel")).text
    for path in ("/runs", "/events", "/golden-configurations", "/proposers"):
        assert "plotly" not in (await client.get(path)).text, path


async def test_openapi_documents_every_json_route(client):
    """Every /api route is in the OpenAPI document with its docstring as description."""
    spec = (await client.get("/openapi.json")).json()
    for path in (
        "/api/events",
        "/api/events/{event_id}",
        "/api/status",
        "/api/highscores",
        "/api/golden-configurations",
        "/api/score-distribution",
        "/api/simulations/{run_id}",
        "/api/proposers",
        "/health",
        "/ready",
    ):
        operation = spec["paths"][path]["get"]
        assert operation.get("description"), path
    parameters = {p["name"] for p in spec["paths"]["/api/events"]["get"]["parameters"]}
    assert parameters >= {"category", "event", "parameter", "process", "before", "after", "limit"}


async def test_pages_send_a_strict_content_security_policy(client):
    """Pages allow scripts from this server only, so injected inline script could not run."""
    reply = await client.get("/")
    policy = reply.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "unsafe-inline" not in policy.split("style-src")[0]
    assert reply.headers["x-content-type-options"] == "nosniff"


async def test_status_counts_cycles_as_the_spec_says(snakelab_tables, make_client):
    """A history counted by hand, not by the rule under test: four complete cycles, a new
    golden at the end of the second (so the two after it are stagnant), and three steps of
    the fifth: /api/status says 4 cycles, 2 stagnant, 3 steps along, at batch_size (the
    latest checkpoint's entry, index 2)."""
    from ax3l.shared.db.database import Database
    from ax3l.shared.db.event_log import EventLog, HighscoreRow
    from ax3l.shared.event_models import (
        ConfigurationCompared,
        GoldenConfigCreated,
        RoundRobinCheckpoint,
    )

    async with Database(snakelab_tables.settings()) as db:
        log = EventLog(db)
        config = {"seed": 1970}

        async def golden(run: str) -> None:
            await log.log(
                GoldenConfigCreated(
                    run_id=run,
                    config=config,
                    high_score=int(run[1:]),
                    seed=1970,
                    simulations=1,
                    reason="r",
                ),
                highscore=HighscoreRow(1, int(run[1:]), 1970),
            )

        async def step(index: int, run: str, improve: bool = False) -> None:
            await log.log(RoundRobinCheckpoint(parameter_order=list(PARAMETER_ORDER), index=index))
            await log.log(
                ConfigurationCompared(
                    golden_run_id="g", latest_run_id=run, current_golden_run_id=run, reason="r"
                )
            )
            if improve:
                await golden(run)

        await golden("g1")
        runs = iter(f"r{n}" for n in range(2, 100))
        for cycle in range(4):
            for index in range(7):
                await step(index, next(runs), improve=(cycle == 1 and index == 6))
        for index in range(3):
            await step(index, next(runs))
    async with make_client(snakelab_tables) as http:
        status = (await http.get("/api/status")).json()
    assert (status["experiment_cycles"], status["stagnant_cycles"]) == (4, 2)
    assert status["cycle_progress"] == 3 and status["current_parameter"] == "batch_size"
