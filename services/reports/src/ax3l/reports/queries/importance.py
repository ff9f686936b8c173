"""Which entries produced improvements, and what Optuna's importance evaluator makes of the runs.

Ax3l's data is one-at-a-time: each proposal changes one entry of the golden configuration, so
the runs lie along a few lines through successive golden configurations rather than spread
over the space, and a seed change moves every score. Importance evaluators assume a sample
spread over the space; here they mostly tell which values moved the score along those lines.
The page says so.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from ax3l.reports.models.runs import TUNED_COLUMNS
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.registry import PARAMETER_ORDER

# Runs Optuna's evaluator reads: the most recent completed ones (a study of more takes seconds).
IMPORTANCE_RUNS = 3000


class EntryImprovements(BaseModel):
    """One round-robin entry: its runs and how many of them became the golden configuration."""

    model_config = ConfigDict(frozen=True)

    entry: str
    runs: int
    completed: int
    improvements: int = Field(description="its runs that became a new golden configuration")
    rate: float | None = Field(description="improvements per completed run")
    best_score: int | None


class ParameterImportance(BaseModel):
    model_config = ConfigDict(frozen=True)

    column: str
    path: str
    importance: float = Field(description="share of the explained variation (sums to 1)")


class Importance(BaseModel):
    """Entries by the improvements they produced, and Optuna's parameter importances."""

    model_config = ConfigDict(frozen=True)

    entries: list[EntryImprovements]
    parameters: list[ParameterImportance]
    runs_evaluated: int = Field(description="completed runs Optuna's evaluator read")
    evaluator: str
    problem: str | None = Field(description="why there are no parameter importances")


def entry_improvements(frame: pl.DataFrame) -> list[EntryImprovements]:
    """Per round-robin entry (in round-robin order): runs, completed, new goldens, best."""
    proposed = frame.filter(pl.col("entry").is_in(list(PARAMETER_ORDER)))
    grouped = {
        row["entry"]: row
        for row in proposed.group_by("entry")
        .agg(
            pl.len().alias("runs"),
            (pl.col("status") == "completed").sum().alias("completed"),
            pl.col("golden").sum().alias("improvements"),
            pl.col("high_score").filter(pl.col("status") == "completed").max().alias("best"),
        )
        .to_dicts()
    }
    found = []
    for entry in PARAMETER_ORDER:
        row = grouped.get(entry)
        runs = int(row["runs"]) if row else 0
        completed = int(row["completed"]) if row else 0
        improvements = int(row["improvements"]) if row else 0
        found.append(
            EntryImprovements(
                entry=entry,
                runs=runs,
                completed=completed,
                improvements=improvements,
                rate=improvements / completed if completed else None,
                best_score=None if not row or row["best"] is None else int(row["best"]),
            )
        )
    return found


def _distributions(schema: ConfigSchema) -> dict[str, Any]:
    from optuna.distributions import FloatDistribution, IntDistribution

    found: dict[str, Any] = {}
    for column in TUNED_COLUMNS:
        leaf = schema.by_column[column]
        low, high = leaf.minimum, leaf.maximum
        if low is None or high is None or low >= high:
            continue
        if leaf.type == "integer":
            step = int(leaf.multiple_of or 1)
            found[column] = IntDistribution(int(low), int(high), step=step)
        else:
            found[column] = FloatDistribution(float(low), float(high))
    return found


def optuna_importance(
    frame: pl.DataFrame, schema: ConfigSchema
) -> tuple[list[ParameterImportance], int, str | None]:
    """PED-ANOVA importances (Optuna's default evaluator) of the tuned values for the high
    score over the most recent completed runs whose values fit the schema's ranges."""
    import optuna
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions = _distributions(schema)
    done = (
        frame.filter((pl.col("status") == "completed") & pl.col("high_score").is_not_null())
        .drop_nulls(list(distributions))
        .tail(IMPORTANCE_RUNS)
    )
    trials = []
    for row in done.iter_rows(named=True):
        params = {column: row[column] for column in distributions}
        try:
            trial = optuna.trial.create_trial(
                params=params, distributions=distributions, value=float(row["high_score"])
            )
        except ValueError:
            continue  # a value outside the schema's range (an older schema's run)
        trials.append(trial)
    if len(trials) < 20:
        return [], len(trials), f"{len(trials)} completed runs fit the schema; 20 are needed"
    study = optuna.create_study(direction="maximize")
    study.add_trials(trials)
    importances = get_param_importances(study, evaluator=PedAnovaImportanceEvaluator())
    found = [
        ParameterImportance(column=column, path=schema.by_column[column].path, importance=value)
        for column, value in sorted(importances.items(), key=lambda item: -item[1])
    ]
    return found, len(trials), None


class ImportanceCache:
    """Optuna's importances, computed again only when the runs changed (seconds at 3,000)."""

    def __init__(self) -> None:
        self._key: tuple[int, int, int] | None = None
        self._value: tuple[list[ParameterImportance], int, str | None] | None = None
        self._lock = threading.Lock()

    async def importance(self, frame: pl.DataFrame, schema: ConfigSchema) -> Importance:
        completed = frame.filter(pl.col("status") == "completed").height
        key = (frame.height, int(frame["id"][-1]) if frame.height else 0, completed)

        def compute() -> tuple[list[ParameterImportance], int, str | None]:
            with self._lock:
                if self._key != key or self._value is None:
                    self._value = optuna_importance(frame, schema)
                    self._key = key
                return self._value

        parameters, evaluated, problem = await asyncio.to_thread(compute)
        return Importance(
            entries=entry_improvements(frame),
            parameters=parameters,
            runs_evaluated=evaluated,
            evaluator="optuna.importance.PedAnovaImportanceEvaluator",
            problem=problem,
        )
