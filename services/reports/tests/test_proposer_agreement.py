"""Who produced each run, written once (``run_provenance``): the runs page, the golden pages,
the proposers' board, the Optuna export and the comparison's counts agree on every run of a
real experiment whose loop was killed (the real loop with the ``tpe`` proposer, the broker's
own events, a SIGKILL between the seeding submit and its record); and ``ax3l-db upgrade``'s
back-fill of that history, as an older release left it (events only), gives the writers' rows.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import optuna

from ax3l.compare.repeat import read_turns
from ax3l.shared.config_schema import load_schema
from ax3l.shared.db import run_provenance
from ax3l.shared.db.run_provenance import LOOP
from ax3l.testing.databases import run_module
from ax3l.testing.stack import Stack

COLUMNS = ", ".join(run_provenance.COLUMNS)


def _rows(stack: Stack) -> dict[str, tuple[Any, ...]]:
    found = stack.databases.query(f"SELECT {COLUMNS} FROM run_provenance ORDER BY event_id")
    return {row[0]: row for row in found}


def _proposals(rows: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    """The rows of the runs proposals made (not the loop's own, not retries)."""
    return {run: row for run, row in rows.items() if row[6] == row[1]}


async def test_every_view_names_the_same_proposer_and_the_back_fill_gives_the_writers_rows(
    stack: Stack, tmp_path: Path, make_client: Any
) -> None:
    stack.start()
    stack.crash_at("seeding_after_submit")  # the restarted loop records that run (reused)
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
    stack.wait_runs_recorded()
    rows = _rows(stack)
    # Every run SnakeLab holds was made by an event that wrote its row, once.
    assert set(rows) == {run["run_id"] for run in stack.runs()}
    proposals = _proposals(rows)
    assert set(proposals) == {e.get("run_id") for e in stack.events("proposal_accepted")}
    assert len(proposals) >= 8 and {row[2] for row in proposals.values()} == {"tpe"}
    assert {row[2] for run, row in rows.items() if run not in proposals} == {LOOP}

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    done = run_module(
        "ax3l.shared.db.cli", "export", "--optuna", storage, "--study", "s", env=stack.base_env()
    )
    assert done.returncode == 0, done.stderr
    trials = optuna.load_study(study_name="s", storage=storage).get_trials()
    exported = {t.user_attrs["run_id"]: t.user_attrs for t in trials}
    async with make_client(stack.databases) as client:
        runs = (await client.get("/api/runs", params={"limit": 1000})).json()["runs"]
        goldens = (await client.get("/api/golden-configurations")).json()["configurations"]
        page = (await client.get("/golden-configurations")).text
        board = (await client.get("/api/proposers")).json()["proposers"]
    shown = {row["run_id"]: row for row in runs}
    assert set(shown) == set(rows)
    for run, row in rows.items():
        assert (shown[run]["proposer"], shown[run]["entry"]) == row[2:4], run
        assert shown[run]["golden_run_id"] == row[7], run
        if run in exported:  # the finished ones
            assert (exported[run]["proposer"], exported[run]["entry"]) == row[2:4], run
    assert len(exported) >= len(proposals)
    # The board counts each proposer's proposals as the rows name them.
    assert {(s["proposer"], s["proposals"]) for s in board if s["proposals"]} == {
        ("tpe", len(proposals))
    }
    # The comparison's counts: every proposal's run, none given to another proposer.
    with (
        closing(stack.databases.connect("admin", stack.databases.ax3l_db)) as conn,
        conn.cursor() as cur,
    ):
        counted = read_turns(cur, None, load_schema())
    assert counted.accepted_proposals == len(proposals) and not counted.proposed_by
    for golden in goldens:
        assert golden["proposer"] == rows[golden["run_id"]][2], golden
    assert {golden["proposer"] for golden in goldens} == {"tpe", LOOP}
    assert "proposed by" in page and "tpe" in page
    # Each proposal's golden of its time is the one the broker built it from, and the
    # conversation that proposed it is found (tpe gives no reasons, so none is made up).
    for proposal in stack.events("proposal_accepted"):
        row = shown[proposal.get("run_id")]
        assert row["golden_run_id"] == proposal.get("golden_run_id"), row
        assert row["changes"] and row["reason"] is None, row
        golden = shown[row["golden_run_id"]]
        if row["high_score"] is not None and golden["high_score"] is not None:
            assert row["score_difference"] == row["high_score"] - golden["high_score"]

    # The same history as revision 0002 left it: no table. The upgrade back-fills it once.
    stack.databases.query("DROP TABLE run_provenance")
    stack.databases.query("UPDATE ax3l_alembic_version SET version_num = '0002'")
    stack.databases.query("UPDATE ax3l_meta SET value = '2' WHERE name = 'schema_version'")
    upgraded = run_module("ax3l.shared.db.cli", "upgrade", env=stack.base_env())
    assert upgraded.returncode == 0, upgraded.stderr
    assert "from revision 0002 to 0003" in upgraded.stdout, upgraded.stdout
    assert _rows(stack) == rows
