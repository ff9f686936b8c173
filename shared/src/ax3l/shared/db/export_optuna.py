"""``ax3l-db export --optuna``: the experiment's SnakeLab runs as an Optuna study.

Every finished run becomes one trial: a completed run with a high score is a COMPLETE trial
whose value is that score; a failed or cancelled run, or a completed one without a score, is a
FAIL trial. The params are the nine tuned values (the registry's paths, e.g.
``model.hidden_size``) over the schema's ranges (``IntDistribution`` with the schema's step
for integers, ``FloatDistribution`` for numbers). A value outside the schema's range (a run of
an older schema, or one the user made by hand) is left out of that trial's params and named in
its ``params_outside_schema`` attribute: Optuna refuses a param outside its distribution.

The user attributes are ``run_id``, ``snakelab_id`` (SnakeLab's submission order), ``seed``,
``status``, ``proposer`` and ``entry`` (the run's ``run_provenance`` row, joined: a proposal's
conversation's proposer and its parameter; ``ax3l`` and the ``simulation_submitted`` purpose,
e.g. ``seeding``, for a run the loop submitted itself; a retry's original's) and
``golden`` (whether a ``golden_config_created`` event names the run), ``tags`` and ``notes`` (a
person's, ``ax3l.shared.run_notes``, as they were at the export: a trial already exported
keeps those it had).

Runs still queued or training are left for a later export. Exporting again adds only the runs
whose ``run_id`` no trial of the study has yet, so an interrupted export is finished by running
it again; trials are written 5,000 to a transaction (``add_trials``). One export at a time per
study: two at once could both add the same new runs. Optuna is the optional extra
``ax3l-shared[optuna]``; it is imported only here.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ax3l.shared import run_notes
from ax3l.shared.config_schema import ConfigSchema, cached_schema
from ax3l.shared.db import run_provenance, snakelab_reads
from ax3l.shared.db.database import placeholders
from ax3l.shared.registry import ENTRIES, leaf_domain
from ax3l.shared.settings import Settings

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.trial import FrozenTrial

BULK_CHUNK = 5000  # trials per transaction of the export
TUNED_PATHS: tuple[str, ...] = tuple(path for item in ENTRIES for path in item.paths)
FINISHED_STATES = ("completed", "failed", "cancelled")
# The events that tell which runs became golden, and a person's tags and notes.
_NOTED_EVENTS = (run_provenance.GOLDEN_EVENT, *run_notes.EVENTS)


class ExportError(RuntimeError):
    """The export cannot run: Optuna is missing, or the storage or study does not fit."""


@dataclass(frozen=True)
class ExportSummary:
    """What one export did."""

    study: str
    added_complete: int
    added_failed: int
    already_there: int
    not_finished: int
    seconds: float

    def text(self) -> str:
        return (
            f"study {self.study!r}: added {self.added_complete} completed and"
            f" {self.added_failed} failed trials; {self.already_there} runs were already"
            f" there, {self.not_finished} not finished yet ({self.seconds:.1f} s)"
        )


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:
        raise ExportError(
            "the Optuna export needs Optuna: install the extra, e.g."
            " `uv sync --all-packages --extra optuna` or `pip install 'ax3l-shared[optuna]'`"
        ) from None
    return optuna


def distributions(schema: ConfigSchema) -> dict[str, BaseDistribution]:
    """The nine tuned values' distributions, from the schema's ranges and steps."""
    from optuna.distributions import FloatDistribution, IntDistribution

    found: dict[str, BaseDistribution] = {}
    for path in TUNED_PATHS:
        leaf = schema.by_path[path]
        domain = leaf_domain(leaf)
        if leaf.type == "integer":
            if domain is None:
                raise ExportError(f"{path} has no finite range in the schema")
            step = int(leaf.multiple_of or 1)
            found[path] = IntDistribution(int(min(domain)), int(max(domain)), step=step)
        elif leaf.minimum is None or leaf.maximum is None:
            raise ExportError(f"{path} has no minimum or maximum in the schema")
        else:
            grid = None if leaf.multiple_of is None else float(leaf.multiple_of)
            found[path] = FloatDistribution(float(leaf.minimum), float(leaf.maximum), step=grid)
    return found


def notes_and_goldens(conn: Any) -> tuple[run_notes.RunNotes, set[str]]:
    """A person's tags and notes on the runs, and the runs that became golden, from Ax3l's
    events."""
    noted = run_notes.RunNotes()
    golden: set[str] = set()
    with conn.cursor() as cur:
        cur.execute(
            "SELECT e.name, m.content FROM events e JOIN event_messages m"
            f" ON m.event_id = e.event_id WHERE e.name IN ({placeholders(_NOTED_EVENTS)})"
            " ORDER BY e.event_id",
            _NOTED_EVENTS,
        )
        for name, text in cur.fetchall():
            try:
                content = json.loads(text)
            except (TypeError, ValueError):
                continue
            if not isinstance(content, dict):
                continue
            if name in run_notes.EVENTS:
                noted.add(name, content)
            elif isinstance(content.get("run_id"), str) and content["run_id"]:
                golden.add(content["run_id"])
    return noted, golden


def trial_of(
    row: dict[str, Any],
    schema: ConfigSchema,
    dists: dict[str, BaseDistribution],
    noted: run_notes.RunNotes,
    golden: bool,
) -> FrozenTrial:
    """The trial of one finished run (see the module docstring)."""
    optuna = _optuna()
    params: dict[str, Any] = {}
    outside: list[str] = []
    for path in TUNED_PATHS:
        leaf = schema.by_path[path]
        value = _param_value(row[leaf.column], leaf.type)
        dist = dists[path]
        if value is None or not dist._contains(dist.to_internal_repr(value)):
            outside.append(path)
        else:
            params[path] = value
    complete = row["status"] == "completed" and row["high_score"] is not None
    attrs: dict[str, Any] = {
        "run_id": row["run_id"],
        "snakelab_id": int(row["id"]),
        "seed": None if row["seed"] is None else int(row["seed"]),
        "status": row["status"],
        "proposer": row["proposer"],
        "entry": row["entry"],
        "golden": golden,
        "tags": noted.tags_of(row["run_id"]),
        "notes": noted.notes_of(row["run_id"]),
    }
    if outside:
        attrs["params_outside_schema"] = outside
    trial: FrozenTrial = optuna.trial.create_trial(
        state=optuna.trial.TrialState.COMPLETE if complete else optuna.trial.TrialState.FAIL,
        value=float(row["high_score"]) if complete else None,
        params=params,
        distributions={path: dists[path] for path in params},
        user_attrs=attrs,
    )
    started = _when(row["started_at"]) or _when(row["created_at"])
    if started is not None:
        trial.datetime_start = started
        trial.datetime_complete = _when(row["completed_at"]) or started
    return trial


def _param_value(raw: Any, kind: str) -> int | float | None:
    if raw is None:
        return None
    value = float(raw)
    if not math.isfinite(value):
        return None
    if kind == "integer":
        return int(value) if value.is_integer() else None
    return value


def _when(value: Any) -> datetime | None:
    # SnakeLab writes naive UTC; a FrozenTrial's times are naive local time.
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC).astimezone().replace(tzinfo=None)


def add_trials(study: Any, trials: list[FrozenTrial]) -> None:
    """``study.add_trials(trials)``, in one transaction when the storage is an RDB storage.

    Optuna's ``add_trials`` commits each trial with a dozen queries (about 50 ms a trial, hours
    for 100,000 runs). For an RDB storage the same rows are inserted in bulk into Optuna's own
    tables (``optuna.storages._rdb.models``, the schema of Optuna 5) in one transaction, the
    study's row locked as ``add_trial`` locks it: each trial with its number, state and times
    (naive UTC), its value, params (internal representation and distribution JSON) and user
    attributes, what ``add_trial`` stores. The tests read
    the study back through Optuna's public API. Other storages (journal, in-memory) take the
    public path.
    """
    optuna = _optuna()
    backend = getattr(study._storage, "_backend", study._storage)
    if not trials:
        return
    if not isinstance(backend, optuna.storages.RDBStorage):
        study.add_trials(trials)
        return
    for trial in trials:
        trial._validate()
    from optuna.distributions import distribution_to_json
    from optuna.storages._rdb import models
    from sqlalchemy import func, insert, select

    tables = models.TrialModel.__table__
    study_id = study._study_id
    session = backend.scoped_session()
    try:
        models.StudyModel.find_or_raise_by_id(study_id, session, for_update=True)
        conn = session.connection()
        first = conn.execute(
            select(func.count()).select_from(tables).where(tables.c.study_id == study_id)
        ).scalar_one()
        conn.execute(
            insert(tables),
            [
                {
                    "number": first + offset,
                    "study_id": study_id,
                    "state": trial.state,
                    "datetime_start": _utc(trial.datetime_start),
                    "datetime_complete": _utc(trial.datetime_complete),
                }
                for offset, trial in enumerate(trials)
            ],
        )
        ids = dict(
            conn.execute(
                select(tables.c.number, tables.c.trial_id).where(
                    tables.c.study_id == study_id, tables.c.number >= first
                )
            ).all()
        )
        values: list[dict[str, Any]] = []
        params: list[dict[str, Any]] = []
        attrs: list[dict[str, Any]] = []
        for offset, trial in enumerate(trials):
            trial_id = ids[first + offset]
            if trial.value is not None:
                stored, kind = models.TrialValueModel.value_to_stored_repr(trial.value)
                values.append(
                    {"trial_id": trial_id, "objective": 0, "value": stored, "value_type": kind}
                )
            for name, value in trial.params.items():
                dist = trial.distributions[name]
                params.append(
                    {
                        "trial_id": trial_id,
                        "param_name": name,
                        "param_value": dist.to_internal_repr(value),
                        "distribution_json": distribution_to_json(dist),
                    }
                )
            attrs.extend(
                {"trial_id": trial_id, "key": key, "value_json": json.dumps(value)}
                for key, value in trial.user_attrs.items()
            )
        for model, rows in (
            (models.TrialValueModel, values),
            (models.TrialParamModel, params),
            (models.TrialUserAttributeModel, attrs),
        ):
            if rows:
                conn.execute(insert(model.__table__), rows)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        backend.scoped_session.remove()


def _utc(value: datetime | None) -> datetime | None:
    # A FrozenTrial's naive local time as the naive UTC Optuna's RDB tables hold.
    return None if value is None else value.astimezone(UTC).replace(tzinfo=None)


def exported_run_ids(study: Any) -> set[str]:
    """The ``run_id`` user attribute of every trial of ``study`` (one query for an RDB
    storage: loading 100,000 trials through Optuna takes minutes)."""
    optuna = _optuna()
    backend = getattr(study._storage, "_backend", study._storage)
    if not isinstance(backend, optuna.storages.RDBStorage):
        stored = study.get_trials(deepcopy=False)
        return {str(t.user_attrs["run_id"]) for t in stored if "run_id" in t.user_attrs}
    from optuna.storages._rdb import models
    from sqlalchemy import select

    trials, attrs = models.TrialModel.__table__, models.TrialUserAttributeModel.__table__
    session = backend.scoped_session()
    try:
        rows = session.connection().execute(
            select(attrs.c.value_json)
            .join(trials, trials.c.trial_id == attrs.c.trial_id)
            .where(trials.c.study_id == study._study_id, attrs.c.key == "run_id")
        )
        return {str(json.loads(text)) for (text,) in rows}
    finally:
        backend.scoped_session.remove()


def export_optuna(
    settings: Settings,
    storage_url: str,
    study_name: str | None,
    connect: Callable[[Settings], Any],
) -> ExportSummary:
    """Add every finished run not yet in the study (``study_name``, default the Ax3l database's
    name) at ``storage_url`` as a trial; creates the study (maximize) when it is missing.
    ``connect`` opens a blocking connection to Ax3l's database (``ax3l-db``'s)."""
    optuna = _optuna()
    began = time.monotonic()
    name = study_name or settings.db_name
    schema = cached_schema(settings.schema_file())
    dists = distributions(schema)
    try:
        study = optuna.create_study(
            storage=storage_url, study_name=name, direction="maximize", load_if_exists=True
        )
    except Exception as exc:  # the storage's driver decides what it raises
        raise ExportError(f"cannot open the Optuna storage: {type(exc).__name__}: {exc}") from exc
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise ExportError(f"study {name!r} exists and does not maximize: choose another --study")
    existing = exported_run_ids(study)
    snakelab = settings.snakelab_db_name
    conn = connect(settings)
    try:
        noted, golden = notes_and_goldens(conn)
        columns = [schema.by_path[path].column for path in TUNED_PATHS]
        with conn.cursor() as cur:
            finished = snakelab_reads.finished_runs(cur, snakelab, columns, FINISHED_STATES)
            waiting = snakelab_reads.count_not_in(cur, snakelab, FINISHED_STATES)
        rows = [row for row in finished if row["run_id"] not in existing]
    finally:
        conn.close()
    trials = [trial_of(row, schema, dists, noted, row["run_id"] in golden) for row in rows]
    study.set_user_attr("source", "ax3l")
    study.set_user_attr("snakelab_database", settings.snakelab_db_name)
    for first in range(0, len(trials), BULK_CHUNK):
        add_trials(study, trials[first : first + BULK_CHUNK])
    complete = sum(1 for t in trials if t.state == optuna.trial.TrialState.COMPLETE)
    return ExportSummary(
        study=name,
        added_complete=complete,
        added_failed=len(trials) - complete,
        already_there=len(existing),
        not_finished=waiting,
        seconds=time.monotonic() - began,
    )


def run_export(
    settings: Settings,
    storage_url: str,
    study_name: str | None,
    connect: Callable[[Settings], Any],
) -> int:
    """``ax3l-db export --optuna``'s body: the summary on stdout, an error on stderr."""
    from ax3l.shared.db.errors import DatabaseError

    try:
        summary = export_optuna(settings, storage_url, study_name, connect)
    except (ExportError, DatabaseError) as exc:
        print(f"ax3l-db export: {exc}", file=sys.stderr)
        return 1
    print(summary.text())
    return 0
