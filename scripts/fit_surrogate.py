"""Fit the reference SnakeLab's surrogate response surface to real SnakeLab runs.

Usage: python scripts/fit_surrogate.py [CSV] [--output JSON]

Reads the real runs (default data/snakelab-runs.csv), fits
an additive model with a linear and a quadratic term per tunable value plus per-seed offsets
by ridge regression, estimates the residual noise and the collapse rate, writes the model
JSON the ``surrogate`` trainer loads and prints the fit statistics. The fit is deterministic:
running it twice gives the same file. services/snakelab/SURROGATE.md describes the model.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = REPO_ROOT / "data" / "snakelab-runs.csv"
DEFAULT_OUTPUT = (
    REPO_ROOT / "services" / "snakelab" / "src" / "snakelab" / "trainers" / "surrogate_model.json"
)

# Priors: what the data cannot tell. Points lost, per tunable, one full legal range (on the
# modelling scale) beyond the values the real runs tried; the loss grows quadratically.
EDGE_PENALTY = {
    "model_hidden_size": 30.0,  # small nets (64) lack capacity for a 51-input policy
    "training_sequence_length": 20.0,  # fully covered by the data
    "training_batch_size": 20.0,  # fully covered by the data
    "training_learning_rate": 45.0,  # one step per episode: a low rate barely learns
    "training_gamma": 20.0,  # fully covered by the data
    "epsilon_initial": 10.0,  # only shifts the exploration schedule a little
    "epsilon_decay": 20.0,  # slow decays are handled by the exploitation factor
    "game_rewards_closer_to_food": 20.0,
    "game_rewards_further_from_food": 20.0,
}
EXPLOITATION: dict[str, float] = {"greedy_moves": 20, "tau": 250.0, "floor": 0.3}
COLLAPSE_PRIOR: dict[str, Any] = {
    "max_probability": 0.06,
    "badness_scale": 1.0,
    "depth_range": [0.03, 0.45],
}
CEILING: dict[str, float] = {"cap": 58.0, "softness": 2.0}
# A run below this share of the median score is a collapse (the data has a gap from 16 to 29).
COLLAPSE_SHARE = 0.5
RIDGE_GRID = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
FOLDS = 10
FOLD_SEED = 1970
QUANTILE_LEVELS = np.linspace(0.0, 1.0, 41)

Array = npt.NDArray[np.float64]


def _runtime() -> ModuleType:
    """The trainer module, so the fit and the runtime share one definition of the surface."""
    source = REPO_ROOT / "services" / "snakelab" / "src"
    if str(source) not in sys.path:
        sys.path.insert(0, str(source))
    return importlib.import_module("snakelab.trainers.surrogate")


class Runs:
    """The completed real runs: tunable values, epochs, seeds and high scores."""

    def __init__(self, rows: list[dict[str, str]], runtime: ModuleType) -> None:
        self.values = [{t.column: float(row[t.column]) for t in runtime.TUNABLES} for row in rows]
        self.epochs = [int(row["epochs"]) for row in rows]
        self.seeds = [int(row["seed"]) for row in rows]
        self.scores = np.array([float(row["high_score"]) for row in rows])
        self.orders = [int(row["order"]) for row in rows]

    def __len__(self) -> int:
        return len(self.seeds)

    def config(self, i: int, runtime: ModuleType) -> dict[str, Any]:
        """The nested config of run ``i`` as far as the surrogate reads it."""
        config: dict[str, Any] = {"epochs": self.epochs[i], "seed": self.seeds[i]}
        for tunable in runtime.TUNABLES:
            node = config
            for key in tunable.path[:-1]:
                node = node.setdefault(key, {})
            value = self.values[i][tunable.column]
            node[tunable.path[-1]] = int(value) if tunable.integer else value
        return config


def load_runs(path: Path, runtime: ModuleType) -> Runs:
    """Completed runs only: a running run's score is still partial."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["status"] == "completed"]
    return Runs(rows, runtime)


def _ranks(x: Array) -> Array:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=np.float64)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    return (np.bincount(inverse, ranks) / counts)[inverse]


def spearman(a: Array, b: Array) -> float:
    """Spearman rank correlation with average ranks for ties."""
    return float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])


def _exploitation(runs: Runs, index: Sequence[int], runtime: ModuleType) -> Array:
    model = runtime.SurrogateModel(_placeholder_spec(runtime))
    return np.array(
        [
            model.exploitation_factor(
                runs.values[i]["epsilon_initial"], runs.values[i]["epsilon_decay"], runs.epochs[i]
            )
            for i in index
        ]
    )


def _placeholder_spec(runtime: ModuleType) -> dict[str, Any]:
    return {
        "intercept": 0.0,
        "terms": [],
        "seed_offsets": {},
        "seed_offset_sd": 0.0,
        "exploitation": EXPLOITATION,
        "collapse": {**COLLAPSE_PRIOR, "base_probability": 0.0, "reference_score": 1.0},
        "ceiling": CEILING,
        "residual_quantiles": [[0.0, 0.0], [1.0, 0.0]],
    }


def fit(runs: Runs, index: Sequence[int], ridge: float, runtime: ModuleType) -> dict[str, Any]:
    """Model spec fitted to runs ``index`` (collapses excluded from the surface fit)."""
    scores = runs.scores[list(index)]
    collapsed = scores < COLLAPSE_SHARE * float(np.median(scores))
    fit_rows = [i for i, c in zip(index, collapsed, strict=True) if not c]
    # The surface describes a run with full exploitation; divide the factor out of the data.
    target = runs.scores[fit_rows] / _exploitation(runs, fit_rows, runtime)

    columns: list[Array] = []
    terms: list[dict[str, Any]] = []
    for tunable in runtime.TUNABLES:
        u = np.array([tunable.coordinate(runs.values[i][tunable.column]) for i in fit_rows])
        center = float(np.median(u))
        scale = (tunable.coordinate(tunable.high) - tunable.coordinate(tunable.low)) / 2.0
        z = (u - center) / scale
        columns += [z, z * z]
        terms.append(
            {
                "column": tunable.column,
                "transform": tunable.transform,
                "center": round(center, 6),
                "scale": round(scale, 6),
                "support": [round(float(u.min()), 6), round(float(u.max()), 6)],
                "edge_penalty": EDGE_PENALTY[tunable.column],
            }
        )
    seeds = sorted({runs.seeds[i] for i in fit_rows})
    for seed in seeds:
        columns.append(np.array([1.0 if runs.seeds[i] == seed else 0.0 for i in fit_rows]))
    design = np.column_stack(columns)

    # Ridge with an unpenalised intercept: centre, solve the normal equations.
    mean_x = design.mean(axis=0)
    mean_y = float(target.mean())
    centred = design - mean_x
    coef = np.linalg.solve(
        centred.T @ centred + ridge * np.eye(design.shape[1]), centred.T @ (target - mean_y)
    )
    intercept = mean_y - float(mean_x @ coef)
    for j, term in enumerate(terms):
        term["linear"] = round(float(coef[2 * j]), 6)
        term["quadratic"] = round(float(coef[2 * j + 1]), 6)
    offsets = coef[2 * len(terms) :]

    spec: dict[str, Any] = {
        "format": 1,
        "intercept": round(intercept, 6),
        "terms": terms,
        "seed_offsets": {str(s): round(float(o), 6) for s, o in zip(seeds, offsets, strict=True)},
        "seed_offset_sd": round(float(np.std(offsets, ddof=1)) if len(seeds) > 1 else 0.0, 6),
        "exploitation": EXPLOITATION,
        "collapse": {},
        "ceiling": CEILING,
        "residual_quantiles": [[0.0, 0.0], [1.0, 0.0]],
    }
    model = runtime.SurrogateModel({**spec, "collapse": _placeholder_spec(runtime)["collapse"]})
    means = np.array(
        [model.mean_score(runs.values[i], runs.epochs[i], runs.seeds[i]) for i in index]
    )
    fitted = means[~collapsed]
    relative = runs.scores[fit_rows] / fitted - 1.0
    spec["residual_quantiles"] = [
        [round(float(level), 4), round(float(value), 6)]
        for level, value in zip(
            QUANTILE_LEVELS, np.quantile(relative, QUANTILE_LEVELS), strict=True
        )
    ]

    # Calibrate the base collapse probability so the data's collapse rate is reproduced.
    reference = float(np.median(fitted))
    badness = np.maximum(0.0, 1.0 - means / reference)
    weight = float(np.mean(1.0 - np.exp(-badness / COLLAPSE_PRIOR["badness_scale"])))
    rate = float(collapsed.mean())
    top = float(COLLAPSE_PRIOR["max_probability"])
    base = max(0.0, (rate - top * weight) / (1.0 - weight))
    spec["collapse"] = {
        **COLLAPSE_PRIOR,
        "base_probability": round(base, 6),
        "reference_score": round(reference, 4),
    }
    spec["ridge"] = ridge
    return spec


def _folds(n: int) -> npt.NDArray[np.int64]:
    return np.random.default_rng(FOLD_SEED).permutation(n) % FOLDS


def cross_validate(runs: Runs, ridge: float, runtime: ModuleType) -> Array:
    """Held-out mean prediction for every run (each from a fit without its fold)."""
    folds = _folds(len(runs))
    predictions = np.zeros(len(runs))
    for fold in range(FOLDS):
        train = [i for i in range(len(runs)) if folds[i] != fold]
        test = [i for i in range(len(runs)) if folds[i] == fold]
        model = runtime.SurrogateModel(fit(runs, train, ridge, runtime))
        for i in test:
            predictions[i] = model.mean_score(runs.values[i], runs.epochs[i], runs.seeds[i])
    return predictions


def _summary(scores: Array) -> dict[str, float]:
    quantiles = np.quantile(scores, [0.05, 0.25, 0.5, 0.75, 0.95])
    return {
        "mean": round(float(scores.mean()), 2),
        "sd": round(float(scores.std()), 2),
        "min": float(scores.min()),
        "p05": round(float(quantiles[0]), 2),
        "p25": round(float(quantiles[1]), 2),
        "median": round(float(quantiles[2]), 2),
        "p75": round(float(quantiles[3]), 2),
        "p95": round(float(quantiles[4]), 2),
        "max": float(scores.max()),
        "collapses_below_20": int((scores < 20).sum()),
    }


def build(csv_path: Path) -> dict[str, Any]:
    """The complete model spec, with its fit statistics under ``fit``."""
    runtime = _runtime()
    runs = load_runs(csv_path, runtime)
    everyone = list(range(len(runs)))
    collapsed = runs.scores < COLLAPSE_SHARE * float(np.median(runs.scores))

    mse = {}
    held_out: dict[float, Array] = {}
    for ridge in RIDGE_GRID:
        held_out[ridge] = cross_validate(runs, ridge, runtime)
        errors = held_out[ridge][~collapsed] - runs.scores[~collapsed]
        mse[ridge] = float(np.mean(errors**2))
    ridge = min(RIDGE_GRID, key=lambda r: (mse[r], r))
    prediction = held_out[ridge]

    folds = _folds(len(runs))
    baseline = np.zeros(len(runs))
    for fold in range(FOLDS):
        train = (folds != fold) & ~collapsed
        baseline[folds == fold] = runs.scores[train].mean()

    spec = fit(runs, everyone, ridge, runtime)
    model = runtime.SurrogateModel(spec)
    surrogate = np.array([float(model.high_score(runs.config(i, runtime))) for i in everyone])
    fresh_seeds = np.array(
        [
            float(model.high_score({**runs.config(i, runtime), "seed": seed}))
            for i in everyone
            for seed in range(1980, 1990)
        ]
    )
    ok = ~collapsed
    spec["fit"] = {
        "source": csv_path.name,
        "runs_used": len(runs),
        "collapses": int(collapsed.sum()),
        "ridge_grid_cv_mse": {str(r): round(m, 4) for r, m in mse.items()},
        "cross_validation": {
            "folds": FOLDS,
            "spearman_all": round(spearman(prediction, runs.scores), 4),
            "spearman_no_collapses": round(spearman(prediction[ok], runs.scores[ok]), 4),
            "mae_all": round(float(np.abs(prediction - runs.scores).mean()), 4),
            "mae_no_collapses": round(float(np.abs(prediction - runs.scores)[ok].mean()), 4),
            "baseline_mae_all": round(float(np.abs(baseline - runs.scores).mean()), 4),
            "baseline_mae_no_collapses": round(float(np.abs(baseline - runs.scores)[ok].mean()), 4),
        },
        "in_sample_spearman_no_collapses": round(
            spearman(
                np.array(
                    [
                        model.mean_score(runs.values[i], runs.epochs[i], runs.seeds[i])
                        for i in everyone
                    ]
                )[ok],
                runs.scores[ok],
            ),
            4,
        ),
        "distribution": {
            "real": _summary(runs.scores),
            "surrogate_same_configs_and_seeds": _summary(surrogate),
            "surrogate_same_configs_seeds_1980_1989": _summary(fresh_seeds),
        },
        "surrogate_draw_vs_real": {
            "spearman": round(spearman(surrogate, runs.scores), 4),
            "mae": round(float(np.abs(surrogate - runs.scores).mean()), 4),
        },
    }
    return spec


def main(argv: Sequence[str] | None = None) -> int:
    """Fit, write the JSON, print the statistics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("csv", nargs="?", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    spec = build(args.csv)
    args.output.write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(spec["fit"], indent=1))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
