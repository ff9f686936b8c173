"""Notes and tags on runs and goldens: ``ax3l-db note`` and ``ax3l-db tag`` (real
subprocesses) write an event each; the runs table (filter, CSV, Parquet), the run page, the
golden page and API, the dashboard, the event log and the Optuna export show them."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import optuna
import polars as pl
import pytest
from reports_history import HOSTILE
from run_story import write_story

from ax3l.shared.db.database import Database
from ax3l.shared.run_notes import NoteRefused, add_note, change_tags
from ax3l.testing.databases import run_module


def _db(dbs, *args: str):  # type: ignore[no-untyped-def]
    return run_module("ax3l.shared.db.cli", *args, env={**os.environ, **dbs.env()})


async def test_notes_and_tags_are_events_shown_on_every_page_and_exported(
    snakelab_tables, make_client, tmp_path: Path
):
    """A note (markup in it stays text) and tags on the golden run and a tag taken off again;
    refusals for an unknown run, an empty note and a bad tag write nothing."""
    dbs = snakelab_tables
    story = await write_story(dbs)
    golden, other = story.runs["model"].run_id, story.runs["llm"].run_id
    note = f"Lucky seed? {HOSTILE}"
    writes: list[tuple[str, ...]] = [
        ("note", golden, note),
        ("note", golden, "  Re-run it on 1975.  "),
        ("tag", golden, "best", "lucky-seed"),
        ("tag", other, "odd", "best"),
        ("tag", other, "--remove", "best"),
    ]
    for args in writes:
        done = _db(dbs, *args)
        assert done.returncode == 0, done.stderr
    refused = {
        "unknown run": (("note", "no-such-run", "x"), "SnakeLab has no run no-such-run"),
        "bad tag": (("tag", golden, "two words"), "is not a tag"),
    }
    for why, (args, said) in refused.items():
        done = _db(dbs, *args)
        assert done.returncode == 2 and said in done.stderr, (why, done.stderr)
    async with Database(dbs.settings()) as db:  # the same refusals, without a process each
        with pytest.raises(NoteRefused, match="the note is empty"):
            await add_note(db, golden, "   ")
        with pytest.raises(NoteRefused, match="name a tag"):
            await change_tags(db, golden, [], [])
        with pytest.raises(NoteRefused, match="at most 2000"):
            await add_note(db, golden, "x" * 2001)
    (count,) = dbs.query("SELECT COUNT(*) FROM events WHERE category = 'Note'")[0]
    assert count == 2 + 2 + 2 + 1

    async with make_client(dbs) as http:
        rows = {r["run_id"]: r for r in (await http.get("/api/runs")).json()["runs"]}
        assert rows[golden]["tags"] == ["best", "lucky-seed"]
        assert rows[golden]["notes"] == [note, "Re-run it on 1975."]
        assert rows[other]["tags"] == ["odd"] and rows[other]["notes"] == []
        best = (await http.get("/api/runs", params={"tag": "best"})).json()["runs"]
        assert [r["run_id"] for r in best] == [golden]

        exported = (await http.get("/api/runs/export.csv")).text
        by_run = {r["run_id"]: r for r in csv.DictReader(io.StringIO(exported))}
        assert by_run[golden]["tags"] == "best,lucky-seed"
        assert by_run[golden]["notes"] == f"{note}\n\nRe-run it on 1975."
        parquet = pl.read_parquet(io.BytesIO((await http.get("/api/runs/export.parquet")).content))
        assert parquet.filter(pl.col("run_id") == golden)["tags"].to_list() == [
            ["best", "lucky-seed"]
        ]

        page = (await http.get(f"/simulations/{golden}")).text
        assert "&lt;script&gt;window.__pwned" in page and "<script>window" not in page
        assert '<a class="tag" href="/runs?tag=lucky-seed">lucky-seed</a>' in page
        assert "<li>Re-run it on 1975.</li>" in page
        assert "Note on run " in page  # the note's event, in a sentence

        listed = (await http.get("/runs")).text
        line = listed[listed.index(f'data-run-id="{golden}"') :].split("</tr>")[0]
        assert ">best</a>" in line and "2 notes</span>" in line
        assert '<option value="lucky-seed">lucky-seed</option>' in listed

        goldens = (await http.get("/api/golden-configurations")).json()["configurations"]
        newest = goldens[0]
        assert newest["run_id"] == golden
        assert newest["tags"] == ["best", "lucky-seed"] and len(newest["notes"]) == 2
        assert "<li>Re-run it on 1975.</li>" in (await http.get("/golden-configurations")).text
        assert 'id="dash-golden-tags"' in (await http.get("/")).text

        events = (await http.get("/api/events", params={"category": "Note"})).json()["events"]
        assert [e["summary"] for e in events][:2] == [
            f"Run {other[:8]} untagged best",
            f"Run {other[:8]} tagged best",
        ]

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    done = _db(dbs, "export", "--optuna", storage, "--study", "s")
    assert done.returncode == 0, done.stderr
    trials = optuna.load_study(study_name="s", storage=storage).get_trials()
    attrs = {t.user_attrs["run_id"]: t.user_attrs for t in trials}
    assert attrs[golden]["tags"] == ["best", "lucky-seed"]
    assert attrs[golden]["notes"] == [note, "Re-run it on 1975."]
    assert attrs[other]["tags"] == ["odd"] and attrs[other]["notes"] == []
