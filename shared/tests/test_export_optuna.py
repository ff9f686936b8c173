"""``ax3l-db export --optuna``: the runs of a real database as trials of a real Optuna study."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.db.cli import connect, main
from ax3l.shared.db.database import Database
from ax3l.shared.db.event_log import EventLog
from ax3l.shared.db.export_optuna import TUNED_PATHS, export_optuna
from ax3l.shared.event_models import GoldenConfigCreated, ProposalAccepted, SimulationSubmitted
from ax3l.shared.settings import get_settings
from ax3l.testing.databases import TestDatabases
from ax3l.testing.provenance import backfilled
from ax3l.testing.snakelab_rows import insert_runs

SCHEMA = cached_schema()


def _config(**changes: object) -> dict[str, object]:
    return SCHEMA.with_values(SCHEMA.default_config(), changes)


def _finish(databases: TestDatabases, run_id: str, status: str, score: int | None) -> None:
    databases.query(
        "UPDATE simulation_runs SET status = %s, high_score = %s, started_at = created_at,"
        " completed_at = created_at WHERE run_id = %s",
        (status, score, run_id),
        user="snakelab",
    )


async def _log_history(databases: TestDatabases, seeding: str, proposal: str) -> None:
    async with Database(databases.settings()) as db:
        log = EventLog(db)
        await log.log(SimulationSubmitted(run_id=seeding, purpose="seeding"))
        await log.log(
            GoldenConfigCreated(
                run_id=seeding, config={}, high_score=40, seed=1970, simulations=1, reason="x"
            )
        )
        await log.log(ProposalAccepted(parameter="gamma", run_id=proposal, proposer="tpe"))
    backfilled(databases)


async def test_runs_become_trials_with_params_values_and_attributes_once(
    snakelab_tables: TestDatabases, tmp_path: Path
) -> None:
    """Completed runs are COMPLETE trials valued by their high score with the nine tuned values
    as params, failed runs FAIL trials, unfinished runs wait; a second export adds only the
    runs finished since, and the study read back through Optuna's API matches the database."""
    dbs = snakelab_tables
    seeding, proposal, failed, waiting = insert_runs(
        dbs,
        SCHEMA,
        _config(),
        _config(**{"training.gamma": 0.95}),
        _config(**{"model.hidden_size": 128}),
        _config(**{"training.batch_size": 16}),
        database=dbs.snakelab_db,
        status="queued",
    )
    _finish(dbs, seeding, "completed", 40)
    _finish(dbs, proposal, "completed", 44)
    _finish(dbs, failed, "failed", None)
    await _log_history(dbs, seeding, proposal)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    settings = dbs.settings()

    first = export_optuna(settings, storage, "exp", connect)
    assert (first.added_complete, first.added_failed, first.not_finished) == (2, 1, 1)

    study = optuna.load_study(study_name="exp", storage=storage)
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    by_run = {t.user_attrs["run_id"]: t for t in study.get_trials()}
    assert set(by_run) == {seeding, proposal, failed}
    rows = dbs.query(
        "SELECT r.run_id, r.status, r.high_score, c.seed, "
        + ", ".join("c." + SCHEMA.by_path[p].column for p in TUNED_PATHS)
        + " FROM simulation_runs r JOIN configurations c ON c.run_id = r.run_id",
        user="snakelab",
    )
    for run_id, status, score, seed, *values in rows:
        if run_id == waiting:
            continue
        trial = by_run[run_id]
        assert trial.params == pytest.approx(dict(zip(TUNED_PATHS, values, strict=True)))
        assert trial.user_attrs["seed"] == seed and trial.user_attrs["status"] == status
        if status == "completed":
            assert trial.state == optuna.trial.TrialState.COMPLETE and trial.value == score
        else:
            assert trial.state == optuna.trial.TrialState.FAIL and trial.value is None
    assert by_run[seeding].user_attrs.items() >= {"golden": True, "entry": "seeding"}.items()
    wanted = {"golden": False, "entry": "gamma", "proposer": "tpe"}
    assert by_run[proposal].user_attrs.items() >= wanted.items()
    assert by_run[failed].user_attrs["proposer"] is None
    assert isinstance(
        by_run[proposal].distributions["model.hidden_size"], optuna.distributions.IntDistribution
    )
    assert study.best_trial.user_attrs["run_id"] == proposal

    _finish(dbs, waiting, "completed", 50)
    second = export_optuna(settings, storage, "exp", connect)
    assert (second.added_complete, second.added_failed, second.already_there) == (1, 0, 3)
    study = optuna.load_study(study_name="exp", storage=storage)
    assert len(study.trials) == 4 and study.best_value == 50
    # Most Optuna users' first call: a pandas frame (pandas comes with the dashboard extra).
    frame = study.trials_dataframe()
    assert len(frame) == 4 and frame["value"].max() == 50
    assert set(frame["user_attrs_proposer"].dropna()) == {"tpe", "ax3l"}
    assert frame["params_training.gamma"].notna().all()


async def test_a_value_outside_the_schema_is_left_out_of_the_trial_and_named(
    snakelab_tables: TestDatabases, tmp_path: Path
) -> None:
    """A run whose value is outside the schema's range keeps its other params and names the
    one Optuna could not take."""
    dbs = snakelab_tables
    (run,) = insert_runs(dbs, SCHEMA, _config(), database=dbs.snakelab_db)
    _finish(dbs, run, "completed", 30)
    dbs.query(
        "UPDATE configurations SET model_hidden_size = 1000 WHERE run_id = %s",
        (run,),
        user="admin",
        database=dbs.snakelab_db,
    )
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    export_optuna(dbs.settings(), storage, None, connect)
    (trial,) = optuna.load_study(study_name=dbs.ax3l_db, storage=storage).trials
    assert "model.hidden_size" not in trial.params and len(trial.params) == 8
    assert trial.user_attrs["params_outside_schema"] == ["model.hidden_size"]


def test_the_command_exports_and_refuses_a_bad_storage_plainly(
    snakelab_tables: TestDatabases,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``ax3l-db export --optuna`` prints its summary; a storage it cannot open is a one-line
    error with exit 1, and the URL's password is not in it."""
    for name, value in snakelab_tables.env().items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        good = main(["export", "--optuna", f"sqlite:///{tmp_path / 's.db'}", "--study", "mine"])
        out = capsys.readouterr()
        assert good == 0, out.err
        assert "study 'mine': added 0 completed and 0 failed trials" in out.out
        bad = main(["export", "--optuna", "mysql+pymysql://u:s3cret@127.0.0.1:1/x"])
        out = capsys.readouterr()
    finally:
        get_settings.cache_clear()
    assert bad == 1 and out.err.startswith("ax3l-db export: cannot open the Optuna storage")
    assert "s3cret" not in out.err and "Traceback" not in out.err
