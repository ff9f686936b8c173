"""A model of every run: what all the experiment's runs say together about each configuration.

The loop decides each step on one noisy run; this module looks at every completed run at once.
It fits a Gaussian process (scikit-learn's ``GaussianProcessRegressor``) to the runs' high
scores:

* each tuned value on the scale the registry declares for it (``registry.SCALES``), mapped to
  [0, 1] over the schema's legal range, under a Matérn 5/2 kernel with one length scale per
  value (what varies little along a value gets a long length scale);
* the seed as an effect: runs on one seed share an offset (a kernel that is its variance for two
  runs on the same seed and 0 otherwise), so a lucky seed lifts every configuration run on it,
  not the one configuration that happens to be there;
* the rest as noise (a white-noise kernel): the hyperparameters, noise included, are fitted by
  maximum marginal likelihood.

A prediction is of the *latent* score: the configuration's mean over seeds, without the seed
effect and the noise, with its standard deviation. Scores far below the others (a run that
collapsed) are raised to ``median - COLLAPSE_SDS`` robust sds before the fit: one collapsed run
would otherwise drag a whole neighbourhood down, while a configuration that collapses often
still ranks low, since all its runs do.

The model recommends only among *evaluated* configurations (at least one completed run): a
model fitted to tens of runs extrapolates badly into corners no run has visited.

scikit-learn (the kernels are ``ax3l.shared.gp_kernels``) is imported at the first fit: a
service that never fits a model does not pay for it at start.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.registry import SCALES, TUNED_PATHS, Scale

Floats = npt.NDArray[np.float64]

# Fewer completed runs than this: no model (a fit would be its prior).
MIN_RUNS = 5
# Scores below median - COLLAPSE_SDS robust sds are raised to that bound before the fit.
COLLAPSE_SDS = 3.0
# A seed no run has: predicting there averages over seeds (the seed effect's mean is 0).
UNSEEN_SEED = -1.0e12
# A long experiment (the user's has about 1,800 runs) is modelled from its most recent
# MAX_RUNS; the hyperparameters are fitted to the most recent MAX_FIT_RUNS of those (each
# step of the fit decomposes an n x n matrix: 400 runs take about a second, 2,000 minutes).
MAX_RUNS = 2000
MAX_FIT_RUNS = 400


class TooFewRuns(ValueError):
    """Fewer than ``MIN_RUNS`` completed runs: nothing to fit yet."""


@dataclass(frozen=True)
class RunRecord:
    """A completed run: its tuned values (``TUNED_PATHS`` order), seed and high score."""

    run_id: str
    values: tuple[float, ...]
    seed: int
    score: float


@dataclass(frozen=True)
class Dimension:
    """A tuned value's legal range and declared scale."""

    path: str
    low: float
    high: float
    scale: Scale

    def _on_scale(self, value: float) -> float:
        if self.scale == "log":
            return math.log(value)
        if self.scale == "log_complement":
            return -math.log(1.0 - value)
        return value

    def unit(self, value: float) -> float:
        """``value`` on the declared scale, 0 at the legal low and 1 at the legal high."""
        low, high = self._on_scale(self.low), self._on_scale(self.high)
        if high == low:
            return 0.0
        return (self._on_scale(value) - low) / (high - low)

    def grid(self, points: int) -> list[float]:
        """``points`` values from low to high, evenly spaced on the declared scale."""
        if self.scale == "log":
            return [float(v) for v in np.geomspace(self.low, self.high, points)]
        if self.scale == "log_complement":
            ends = np.geomspace(1.0 - self.low, 1.0 - self.high, points)
            return [float(1.0 - v) for v in ends]
        return [float(v) for v in np.linspace(self.low, self.high, points)]


class Space:
    """The tuned values of ``schema`` as model coordinates."""

    def __init__(self, schema: ConfigSchema):
        dims = []
        for path in TUNED_PATHS:
            leaf = schema.by_path[path]
            low = leaf.minimum if leaf.minimum is not None else leaf.const
            high = leaf.maximum if leaf.maximum is not None else leaf.const
            dims.append(Dimension(path, float(low), float(high), SCALES[path]))
        self.dimensions: tuple[Dimension, ...] = tuple(dims)
        self.schema = schema

    def encode(self, values: Sequence[float]) -> list[float]:
        return [dim.unit(float(v)) for dim, v in zip(self.dimensions, values, strict=True)]

    def values_of(self, config: Mapping[str, Any]) -> tuple[float, ...]:
        """A nested configuration's tuned values, in ``TUNED_PATHS`` order."""
        return tuple(float(self.schema.get(dict(config), path)) for path in TUNED_PATHS)

    def index(self, path: str) -> int:
        return TUNED_PATHS.index(path)


def tuned_columns() -> tuple[str, ...]:
    """SnakeLab's column of each tuned value, in ``TUNED_PATHS`` order."""
    return tuple(path.replace(".", "_") for path in TUNED_PATHS)


def fixed_columns(schema: ConfigSchema, reference: dict[str, Any]) -> dict[str, Any]:
    """Every column that is neither tuned nor the seed, with ``reference``'s value (the
    golden's): the runs a model of the experiment pools hold these equal."""
    tuned = set(tuned_columns())
    flat = schema.flatten(reference)
    return {c: v for c, v in flat.items() if c not in tuned and c != "seed"}


def records_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[RunRecord]:
    """The completed, scored runs among SnakeLab rows (``run_id``, ``status``, ``high_score``,
    ``seed`` and the tuned columns), in the rows' order."""
    columns = tuned_columns()
    return [
        RunRecord(
            str(row["run_id"]),
            tuple(float(row[column]) for column in columns),
            int(row["seed"]),
            float(row["high_score"]),
        )
        for row in rows
        if row["status"] == "completed" and row["high_score"] is not None
    ]


@dataclass(frozen=True)
class Estimate:
    """A configuration's predicted mean score over seeds and its standard deviation."""

    mean: float
    sd: float

    def lower(self, sds: float) -> float:
        return self.mean - sds * self.sd


@dataclass(frozen=True)
class Evaluated:
    """A configuration with completed runs: its values, the model's estimate and its runs."""

    values: tuple[float, ...]
    estimate: Estimate
    run_ids: tuple[str, ...]
    seeds: tuple[int, ...]
    scores: tuple[float, ...]


@dataclass(frozen=True)
class Fitted:
    """What a fit found, in score points: enough to start the next fit from it."""

    kernel: Any  # the fitted scikit-learn kernel
    noise_sd: float
    seed_sd: float
    signal_sd: float
    length_scales: dict[str, float] = field(default_factory=dict)


class RunModel:
    """A fit of ``records`` (``MIN_RUNS`` or more). ``start`` begins from an earlier fit's
    hyperparameters; with ``optimize`` False they are kept as they are (a cheap update that
    only conditions on the new runs)."""

    def __init__(
        self,
        space: Space,
        records: Sequence[RunRecord],
        *,
        start: Fitted | None = None,
        optimize: bool = True,
    ):
        if len(records) < MIN_RUNS:
            raise TooFewRuns(f"{len(records)} completed runs; the model needs {MIN_RUNS}")
        from ax3l.shared.gp_kernels import initial_kernel

        self.space = space
        self.records = list(records)[-MAX_RUNS:]
        records = self.records
        inputs = np.array(
            [[*space.encode(r.values), float(r.seed)] for r in records], dtype=np.float64
        )
        scores = np.array([r.score for r in records], dtype=np.float64)
        scores = _raise_collapses(scores)
        self._center = float(scores.mean())
        self._scale = float(scores.std()) or 1.0
        targets = (scores - self._center) / self._scale
        kernel = start.kernel if start is not None else initial_kernel(len(TUNED_PATHS))
        with one_blas_thread():
            if optimize or start is None:
                recent = slice(-MAX_FIT_RUNS, None)
                kernel = _most_likely(kernel, inputs[recent], targets[recent])
            self._gp = _conditioned(kernel, inputs, targets)
        self.fitted = self._describe()
        self.log_marginal_likelihood = float(self._gp.log_marginal_likelihood_value_)
        self._evaluated: list[Evaluated] | None = None

    def _describe(self) -> Fitted:
        kernel = self._gp.kernel_
        signal, seed, noise = kernel.k1.k1, kernel.k1.k2, kernel.k2
        return Fitted(
            kernel=kernel,
            noise_sd=self._scale * math.sqrt(noise.noise_level),
            seed_sd=self._scale * math.sqrt(seed.k1.constant_value),
            signal_sd=self._scale * math.sqrt(signal.k1.constant_value),
            length_scales=dict(zip(TUNED_PATHS, _length_scales(signal.k2), strict=True)),
        )

    def predict(self, values: Sequence[Sequence[float]]) -> list[Estimate]:
        """The latent mean score over seeds of each configuration, and its sd."""
        if not values:
            return []
        from scipy.linalg import solve_triangular

        signal = self._gp.kernel_.k1.k1
        points = np.array([[*self.space.encode(v), UNSEEN_SEED] for v in values], dtype=np.float64)
        cross = signal(points, self._gp.X_train_)
        mean = cross @ self._gp.alpha_
        with one_blas_thread():
            solved = solve_triangular(self._gp.L_, cross.T, lower=True, check_finite=False)
        variance = signal.diag(points) - np.einsum("ij,ij->j", solved, solved)
        sd = np.sqrt(np.maximum(variance, 0.0))
        return [
            Estimate(self._center + self._scale * float(m), self._scale * float(s))
            for m, s in zip(mean, sd, strict=True)
        ]

    def evaluated(self) -> list[Evaluated]:
        """Every configuration with completed runs, in the order of its first run (predicted
        once per fit: a fit never changes, and the report server asks for it at every load)."""
        if self._evaluated is None:
            self._evaluated = self._evaluate()
        return list(self._evaluated)

    def _evaluate(self) -> list[Evaluated]:
        runs: dict[tuple[float, ...], list[RunRecord]] = {}
        for record in self.records:
            runs.setdefault(record.values, []).append(record)
        estimates = self.predict(list(runs))
        return [
            Evaluated(
                values,
                estimate,
                tuple(r.run_id for r in mine),
                tuple(r.seed for r in mine),
                tuple(r.score for r in mine),
            )
            for (values, mine), estimate in zip(runs.items(), estimates, strict=True)
        ]

    def recommend(
        self, *, lower_bound_sds: float = 0.0, among: Iterable[tuple[float, ...]] | None = None
    ) -> Evaluated:
        """The evaluated configuration with the best predicted mean (``lower_bound_sds`` > 0: the
        best ``mean - k sd``), within ``among`` when given; ties go to the one run first."""
        allowed = None if among is None else set(among)
        candidates = [e for e in self.evaluated() if allowed is None or e.values in allowed]
        if not candidates:
            raise TooFewRuns("no evaluated configuration to recommend")
        return max(candidates, key=lambda e: e.estimate.lower(lower_bound_sds))

    def effect(self, path: str, around: Sequence[float], values: Sequence[float]) -> list[Estimate]:
        """The predicted score as ``path`` takes each of ``values``, every other tuned value as in
        ``around``: the tunable's effect curve."""
        at = self.space.index(path)
        points = []
        for value in values:
            point = list(around)
            point[at] = float(value)
            points.append(point)
        return self.predict(points)


@functools.cache
def _blas() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread() -> Any:
    """A context in which BLAS uses one thread. The model's matrices are a few hundred rows:
    a second thread only waits for the first, and on a busy machine (a comparison's repeats,
    several services) the threads spin against each other, which made one Cholesky
    decomposition fifty times slower here."""
    return _blas().limit(limits=1, user_api="blas")


class Refitter:
    """The fit of the runs as they arrive, cheaply: the same records give the same fit; the
    hyperparameters are optimised again (from the last ones) only when the runs grew by
    ``GROWTH`` since they last were, and otherwise the last ones are conditioned on the new runs
    (milliseconds); every ``COLD_EVERY`` runs a fit from the initial kernel is made too and the
    more likely of the two kept, so that what the first few runs suggested does not hold for
    ever. Not thread-safe: a caller that shares one locks around ``fit``."""

    GROWTH = 1.2
    COLD_EVERY = 10

    def __init__(self, space: Space):
        self.space = space
        self._model: RunModel | None = None
        self._key: tuple[int, str | None] | None = None
        self._optimised_at = 0
        self._cold_at = 0

    def fit(self, records: Sequence[RunRecord]) -> RunModel:
        """The model of ``records`` (``TooFewRuns`` below ``MIN_RUNS``)."""
        key = (len(records), records[-1].run_id if records else None)
        if self._model is not None and key == self._key:
            return self._model
        n, previous = len(records), self._model.fitted if self._model is not None else None
        optimise = previous is None or n >= self.GROWTH * self._optimised_at
        model = RunModel(self.space, records, start=previous, optimize=optimise)
        if optimise:
            self._optimised_at = n
        if previous is None:
            self._cold_at = n  # that fit started from the initial kernel
        elif n >= self._cold_at + self.COLD_EVERY:
            cold = RunModel(self.space, records)
            if cold.log_marginal_likelihood > model.log_marginal_likelihood:
                model = cold
            self._cold_at = self._optimised_at = n
        self._model, self._key = model, key
        return model


def _conditioned(kernel: Any, inputs: Floats, targets: Floats) -> Any:
    """scikit-learn's Gaussian process with ``kernel`` as it is, conditioned on the runs."""
    from sklearn.gaussian_process import GaussianProcessRegressor

    return GaussianProcessRegressor(kernel, optimizer=None).fit(inputs, targets)


def _most_likely(kernel: Any, inputs: Floats, targets: Floats) -> Any:
    """``kernel`` with the hyperparameters of highest log marginal likelihood, found by
    L-BFGS-B from its own (scikit-learn's likelihood and gradient, scipy's optimizer).

    scikit-learn's own optimizer does the same and then warns when a hyperparameter sits at a
    bound, which is the expected outcome here (a value without effect has the longest length
    scale) and, warnings being process-wide, cannot be silenced safely in a thread."""
    from scipy.optimize import minimize

    gp = _conditioned(kernel, inputs, targets)

    def negative(theta: Floats) -> tuple[float, Floats]:
        value, gradient = gp.log_marginal_likelihood(theta, eval_gradient=True, clone_kernel=False)
        return -float(value), -gradient

    bounds = gp.kernel_.bounds
    start = np.clip(gp.kernel_.theta, bounds[:, 0], bounds[:, 1])
    found = minimize(negative, start, jac=True, method="L-BFGS-B", bounds=bounds)
    return kernel.clone_with_theta(found.x)


def _length_scales(kernel: Any) -> list[float]:
    """The fitted length scale of each value's curve."""
    return [float(v) for v in np.atleast_1d(kernel.length_scale)]


def _raise_collapses(scores: Floats) -> Floats:
    """Scores below ``median - COLLAPSE_SDS`` robust sds (1.4826 median absolute deviations),
    raised to that bound."""
    if len(scores) < MIN_RUNS:
        return scores
    median = float(np.median(scores))
    spread = 1.4826 * float(np.median(np.abs(scores - median)))
    if spread <= 0.0:
        return scores
    return np.maximum(scores, median - COLLAPSE_SDS * spread)


def expected_improvement(estimates: Sequence[Estimate], incumbent: float) -> list[float]:
    """Each estimate's expected improvement over ``incumbent`` (the best predicted mean so far)."""
    from statistics import NormalDist

    unit = NormalDist()
    found = []
    for e in estimates:
        if e.sd <= 0.0:
            found.append(max(0.0, e.mean - incumbent))
            continue
        z = (e.mean - incumbent) / e.sd
        found.append((e.mean - incumbent) * unit.cdf(z) + e.sd * unit.pdf(z))
    return found
