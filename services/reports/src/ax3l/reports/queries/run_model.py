"""What the model of every run says, for the pages: the recommendation beside the golden, and
each tuned value's effect curve with its band and the runs behind it.

The model (``ax3l.shared.run_model``) is fitted to every completed run of the runs table, in a
thread, and fitted again only when the runs changed (from the last fit's hyperparameters: a
fraction of a second). The recommendation is the configuration with the best predicted mean
among those with runs (``AX3L_MODEL_LOWER_BOUND``: minus that many sds), never one no run
tried; under the spec's rule the loop does not use it, the page shows it beside the golden.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.registry import SCALES, TUNED_PATHS
from ax3l.shared.run_model import (
    MIN_RUNS,
    Refitter,
    RunModel,
    RunRecord,
    Space,
    TooFewRuns,
    tuned_columns,
)

# Points of an effect curve, and runs drawn beside it (the most recent).
CURVE_POINTS = 41
CURVE_RUNS = 2000


class Predicted(BaseModel):
    """A configuration the runs evaluated, as the model sees it."""

    model_config = ConfigDict(frozen=True)

    run_id: str = Field(description="its most recent completed run")
    values: dict[str, float] = Field(description="its tuned values by config path")
    predicted_mean: float = Field(description="the model's mean score over seeds")
    predicted_sd: float = Field(description="the sd of that mean")
    runs: int = Field(description="its completed runs")
    seeds: list[int] = Field(description="the seeds they ran on")
    scores: list[float] = Field(description="their high scores")


class ModelView(BaseModel):
    """The recommendation of the model of every run, and the golden as the model sees it."""

    model_config = ConfigDict(frozen=True)

    problem: str | None = Field(description="why there is no model (too few runs)")
    runs: int = Field(description="completed runs the model is fitted to")
    seeds: int = Field(description="seeds among them")
    noise_sd: float | None = Field(description="a run's noise around its configuration's mean")
    seed_sd: float | None = Field(description="the spread of the seeds' offsets")
    lower_bound_sds: float = Field(description="AX3L_MODEL_LOWER_BOUND")
    recommendation: Predicted | None
    golden: Predicted | None = Field(description="the current golden configuration")


class Effect(BaseModel):
    """One tuned value's effect curve: the predicted score as it varies, every other value as
    in the recommendation, and the runs' scores against it."""

    model_config = ConfigDict(frozen=True)

    path: str
    scale: str = Field(description="the scale the registry declares for it")
    length_scale: float | None = Field(description="fitted, on [0, 1] over the legal range")
    values: list[float]
    means: list[float]
    sds: list[float]
    recommended: float | None = Field(description="the recommendation's value")
    run_values: list[float] = Field(description="each run's value (most recent runs)")
    run_scores: list[float]
    run_varies_only_this: list[bool] = Field(
        description="the run differs from the recommendation in this value alone"
    )


class Effects(BaseModel):
    model_config = ConfigDict(frozen=True)

    problem: str | None
    runs: int
    effects: list[Effect]


def records_of(frame: pl.DataFrame) -> list[RunRecord]:
    """The completed runs with a high score of the runs table, in submission order."""
    columns = list(tuned_columns())
    done = frame.filter((pl.col("status") == "completed") & pl.col("high_score").is_not_null())
    done = done.drop_nulls([*columns, "seed"])
    return [
        RunRecord(
            str(row["run_id"]),
            tuple(float(row[c]) for c in columns),
            int(row["seed"]),
            float(row["high_score"]),
        )
        for row in done.select(["run_id", "seed", "high_score", *columns]).iter_rows(named=True)
    ]


class RunModelCache:
    """The fit of the runs table's completed runs, refitted only when they changed."""

    def __init__(self) -> None:
        self._refitter: Refitter | None = None
        self._lock = threading.Lock()

    def _fit(self, frame: pl.DataFrame, schema: ConfigSchema) -> tuple[RunModel | None, str | None]:
        records = records_of(frame)
        with self._lock:
            if self._refitter is None:
                self._refitter = Refitter(Space(schema))
            try:
                return self._refitter.fit(records), None
            except TooFewRuns as exc:
                return None, str(exc)

    async def model(
        self, frame: pl.DataFrame, schema: ConfigSchema
    ) -> tuple[RunModel | None, str | None]:
        return await asyncio.to_thread(self._fit, frame, schema)

    async def view(
        self,
        frame: pl.DataFrame,
        schema: ConfigSchema,
        golden_config: dict[str, Any] | None,
        lower_bound: float,
    ) -> ModelView:
        model, problem = await self.model(frame, schema)
        if model is None:
            return ModelView(
                problem=problem or f"the model needs {MIN_RUNS} completed runs",
                runs=0,
                seeds=0,
                noise_sd=None,
                seed_sd=None,
                lower_bound_sds=lower_bound,
                recommendation=None,
                golden=None,
            )
        # The predictions are numpy work of a second or more at 100,000 runs: off the event loop.
        return await asyncio.to_thread(_view, model, golden_config, lower_bound)

    async def effects(
        self, frame: pl.DataFrame, schema: ConfigSchema, lower_bound: float
    ) -> Effects:
        model, problem = await self.model(frame, schema)
        if model is None:
            return Effects(problem=problem, runs=0, effects=[])
        return await asyncio.to_thread(_effects, model, lower_bound)


def _view(model: RunModel, golden_config: dict[str, Any] | None, lower_bound: float) -> ModelView:
    best = model.recommend(lower_bound_sds=lower_bound)
    golden = None
    if golden_config is not None:
        try:
            values = model.space.values_of(golden_config)
        except (KeyError, TypeError, ValueError):  # a stored golden short of a tuned value
            values = None
        golden = next((e for e in model.evaluated() if e.values == values), None)
    return ModelView(
        problem=None,
        runs=len(model.records),
        seeds=len({r.seed for r in model.records}),
        noise_sd=model.fitted.noise_sd,
        seed_sd=model.fitted.seed_sd,
        lower_bound_sds=lower_bound,
        recommendation=_predicted(best),
        golden=None if golden is None else _predicted(golden),
    )


def _predicted(evaluated: Any) -> Predicted:
    return Predicted(
        run_id=evaluated.run_ids[-1],
        values=dict(zip(TUNED_PATHS, evaluated.values, strict=True)),
        predicted_mean=evaluated.estimate.mean,
        predicted_sd=evaluated.estimate.sd,
        runs=len(evaluated.run_ids),
        seeds=list(evaluated.seeds),
        scores=list(evaluated.scores),
    )


def _effects(model: RunModel, lower_bound: float) -> Effects:
    best = model.recommend(lower_bound_sds=lower_bound)
    recent = model.records[-CURVE_RUNS:]
    found = []
    for at, dim in enumerate(model.space.dimensions):
        values = dim.grid(CURVE_POINTS)
        curve = model.effect(dim.path, best.values, values)
        only = [
            all(
                v == b
                for j, (v, b) in enumerate(zip(r.values, best.values, strict=True))
                if j != at
            )
            for r in recent
        ]
        found.append(
            Effect(
                path=dim.path,
                scale=SCALES[dim.path],
                length_scale=model.fitted.length_scales.get(dim.path),
                values=values,
                means=[e.mean for e in curve],
                sds=[e.sd for e in curve],
                recommended=best.values[at],
                run_values=[r.values[at] for r in recent],
                run_scores=[r.score for r in recent],
                run_varies_only_this=only,
            )
        )
    return Effects(problem=None, runs=len(model.records), effects=found)
