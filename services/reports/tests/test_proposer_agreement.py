"""Who proposed each run: the Optuna export, the golden pages and ``/runs`` agree on every run of
a real experiment (the real loop with the ``tpe`` proposer, the broker's own events)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna

from ax3l.shared.run_provenance import LOOP
from ax3l.testing.databases import run_module
from ax3l.testing.stack import Stack


async def test_the_export_the_golden_pages_and_runs_name_the_same_proposer(
    stack: Stack, tmp_path: Path, make_client: Any
) -> None:
    stack.start()
    proc = stack.orchestrator("tpe")

    def promoted() -> bool:
        # A seed rotation's baseline is a golden too: wait for one a proposal won.
        goldens = stack.events("golden_config_created")
        return any(g.get("kind") == "promotion" for g in goldens)

    stack.wait_for(
        lambda: promoted() and stack.count("proposal_accepted") >= 8,
        180,
        "a promotion and eight proposals",
        proc,
    )
    proc.stop()
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    done = run_module(
        "ax3l.shared.db.cli", "export", "--optuna", storage, "--study", "s", env=stack.base_env()
    )
    assert done.returncode == 0, done.stderr
    trials = optuna.load_study(study_name="s", storage=storage).get_trials()
    exported = {t.user_attrs["run_id"]: t.user_attrs["proposer"] for t in trials}

    async with make_client(stack.databases) as client:
        runs = (await client.get("/api/runs", params={"limit": 1000})).json()["runs"]
        goldens = (await client.get("/api/golden-configurations")).json()["configurations"]
        page = (await client.get("/golden-configurations")).text
    shown = {row["run_id"]: row["proposer"] for row in runs}

    proposed = {e.get("run_id") for e in stack.events("proposal_accepted")}
    assert len(proposed) >= 8
    assert {shown[run] for run in proposed} == {"tpe"}
    assert {exported[run] for run in proposed if run in exported} == {"tpe"}
    for run, proposer in exported.items():
        assert proposer == shown[run], run
        assert proposer in ("tpe", LOOP), run
    assert len(goldens) >= 2
    for golden in goldens:
        assert golden["proposer"] == shown[golden["run_id"]], golden
    assert {golden["proposer"] for golden in goldens} == {"tpe", LOOP}
    assert "proposed by" in page and "tpe" in page
    # Each proposal's golden of its time on /runs is the one the broker built it from, and the
    # conversation that proposed it is found (tpe gives no reasons, so none is made up).
    rows = {row["run_id"]: row for row in runs}
    for proposal in stack.events("proposal_accepted"):
        row = rows[proposal.get("run_id")]
        assert row["golden_run_id"] == proposal.get("golden_run_id"), row
        assert row["changes"] and row["reason"] is None, row
        golden = rows[row["golden_run_id"]]
        if row["high_score"] is not None and golden["high_score"] is not None:
            assert row["score_difference"] == row["high_score"] - golden["high_score"]
