"""The design of issue 33 on response surfaces the project does not ship: a simulation of the
loop's round robin in one process, with the product's model (``ax3l.shared.run_model``) and the
model proposer's rule (expected improvement over the entry's open values), against random
proposals, on four surfaces:

* ``shipped``: the reference SnakeLab's surrogate (``predict_high_score``), for calibration
  against ``bench_answers.py``'s real comparison;
* ``mirrored``: the surrogate with every tuned value mirrored inside its legal range (the best
  values, and the cliffs, move to the other side);
* ``interacting``: the surrogate plus three strong interactions (learning rate x batch size,
  hidden size x sequence length, gamma x epsilon decay), which an additive model cannot fit;
* ``additive``: random smooth effects on *linear* coordinates (not the scales the registry
  declares) with cliffs on three random values, its default 38.

Every surface draws a run's score as the surrogate does (multiplicative residual noise of about
10%, rare collapses, a seed offset). The loop: seeding runs the default; each step changes one
entry of the golden to an open value (no configuration twice on a seed); the spec's rule
promotes a higher score, ``follow`` then makes the golden the model's best predicted mean among
configurations run on the current seed (``AX3L_GOLDEN=model``). It is the loop's logic, not the
loop: no services, no database, no crashes. Prints per surface and design the share of the
headroom (expected score of the recommendation - the default's, over the best legal - the
default's) with a bootstrap interval over the repeats.

    .venv/bin/python bench/bench_surfaces.py                 # 16 repeats, budget 50
    .venv/bin/python bench/bench_surfaces.py --budget 150 --repeats 8
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import math
import random
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ax3l.shared.config_schema import cached_schema
from ax3l.shared.registry import ENTRIES, TUNED_PATHS
from ax3l.shared.run_model import Refitter, RunRecord, Space, TooFewRuns, expected_improvement
from snakelab.trainers import surrogate

MODEL = surrogate.load_model()
TUNABLES = surrogate.TUNABLES
COLUMNS = [t.column for t in TUNABLES]
DEFAULT = surrogate.tunable_values(cached_schema().default_config())
ENTRY_COLUMNS = [[p.replace(".", "_") for p in e.paths] for e in ENTRIES]
Values = dict[str, float]


def _unit(values: Values, scaled: bool) -> np.ndarray:
    """Each tuned value on [0, 1] over its legal range (on the surrogate's scale, or linear)."""
    out = []
    for t in TUNABLES:
        f = t.coordinate if scaled else (lambda x: x)
        low, high = f(t.low), f(t.high)
        out.append((f(values[t.column]) - low) / (high - low))
    return np.array(out)


def _draws(key: str, count: int) -> list[float]:
    digest = hashlib.sha256(key.encode()).digest()
    return [int.from_bytes(digest[8 * i : 8 * i + 8], "big") / 2.0**64 for i in range(count)]


class Surface:
    name = ""

    def mean(self, values: Values) -> float:
        raise NotImplementedError

    def score(self, values: Values, seed: int) -> int:
        """A run's high score, drawn as the surrogate draws its own."""
        key = f"{self.name}:{seed}:" + ",".join(f"{values[c]:.10g}" for c in COLUMNS)
        noise, collapse, depth = _draws(key, 3)
        mean = max(0.0, self.mean(values) + MODEL.seed_offset(seed))
        if collapse < MODEL.collapse_probability(mean):
            return max(1, round(mean * (0.03 + 0.42 * depth)))
        relative = float(np.interp(noise, MODEL.residual_levels, MODEL.residual_values))
        return max(0, round(MODEL._soft_ceiling(mean * (1 + relative))))


class Shipped(Surface):
    name = "shipped"

    def mean(self, values: Values) -> float:
        return MODEL.mean_score(values, 1500, None)

    def score(self, values: Values, seed: int) -> int:
        config = cached_schema().with_values(
            cached_schema().default_config(),
            {p: values[p.replace(".", "_")] for p in TUNED_PATHS} | {"seed": seed},
        )
        return surrogate.predict_high_score(config)


class Mirrored(Surface):
    name = "mirrored"

    def mean(self, values: Values) -> float:
        mirrored = {}
        inverse: dict[str, Callable[[float], float]] = {
            "identity": lambda u: u,
            "log2": lambda u: 2**u,
            "log10": lambda u: 10**u,
            "neg_log10_complement": lambda u: 1 - 10 ** (-u),
        }
        for t in TUNABLES:
            u = t.coordinate(t.low) + t.coordinate(t.high) - t.coordinate(values[t.column])
            mirrored[t.column] = inverse[t.transform](u)
        factor = MODEL.exploitation_factor(values["epsilon_initial"], values["epsilon_decay"], 1500)
        return max(0.0, MODEL.surface(mirrored) * factor)


class Interacting(Surface):
    name = "interacting"

    def mean(self, values: Values) -> float:
        z = _unit(values, scaled=True) - 0.5
        pairs = 16.0 * z[3] * z[2] + 12.0 * z[0] * z[1] - 12.0 * z[4] * z[6]
        return max(0.0, MODEL.mean_score(values, 1500, None) + pairs)


class Additive(Surface):
    def __init__(self, seed: int):
        self.name = f"additive{seed}"
        rng = np.random.default_rng(1000 + seed)
        self.best = rng.uniform(0, 1, len(COLUMNS))
        self.amplitude = rng.exponential(1.5, len(COLUMNS))
        self.cliffs = set(rng.choice(len(COLUMNS), 3, replace=False).tolist())
        self.side = rng.integers(0, 2, len(COLUMNS))
        self.shift = 38.0 - self._raw(DEFAULT)

    def _raw(self, values: Values) -> float:
        z = _unit(values, scaled=False)
        total = -float(np.sum(4 * self.amplitude * (z - self.best) ** 2))
        for j in self.cliffs:
            edge = z[j] if self.side[j] == 0 else 1 - z[j]
            total -= 60.0 * max(0.0, 0.25 - edge)
        return total

    def mean(self, values: Values) -> float:
        return max(0.0, self._raw(values) + self.shift)


SURFACES: dict[str, Surface] = {
    s.name: s for s in (Shipped(), Mirrored(), Interacting(), Additive(1))
}


def _grid(t: Any, points: int) -> list[float]:
    if t.domain:
        return [float(v) for v in t.domain]
    return [float(v) for v in np.linspace(t.low, t.high, points)]


def best_legal(surface: Surface) -> float:
    """The best mean over the legal grid, by coordinate search from the default."""
    values, best = dict(DEFAULT), surface.mean(DEFAULT)
    improved = True
    while improved:
        improved = False
        for t in TUNABLES:
            for v in _grid(t, 120):
                trial = {**values, t.column: v}
                if (m := surface.mean(trial)) > best + 1e-9:
                    values, best, improved = trial, m, True
    return best


def _decimals(t: Any) -> int:
    return max(0, math.ceil(-math.log10((t.high - t.low) / 1000)))


def _choices(columns: list[str], rng: random.Random) -> list[tuple[float, ...]]:
    """A finite entry's every legal choice; a continuous one's 129 (a pair's 33 x 33) values
    evenly spaced on the declared scale, rounded as the proposers round."""
    space = Space(cached_schema())
    tunables = [next(t for t in TUNABLES if t.column == c) for c in columns]
    per_value = []
    for t in tunables:
        if t.domain:
            per_value.append([float(v) for v in t.domain])
            continue
        dim = space.dimensions[space.index(".".join(t.path))]
        grid = dim.grid(129 if len(columns) == 1 else 33)
        per_value.append(sorted({round(v, _decimals(t)) for v in grid}))
    return [tuple(c) for c in itertools.product(*per_value)]


@dataclass
class Loop:
    surface: Surface
    seed: int
    budget: int
    proposer: str  # random | model
    follow: bool  # AX3L_GOLDEN=model

    def run(self) -> Values:
        rng = random.Random(self.seed)
        space = Space(cached_schema())
        refitter = Refitter(space)
        runs: list[tuple[Values, int, int]] = []
        done: set[tuple[tuple[float, ...], int]] = set()

        def submit(values: Values, seed: int) -> int:
            key = (tuple(values[c] for c in COLUMNS), seed)
            assert key not in done
            done.add(key)
            score = self.surface.score(values, seed)
            runs.append((dict(values), seed, score))
            return score

        def model() -> Any:
            records = [
                RunRecord(str(i), tuple(float(v[c]) for c in COLUMNS), s, float(score))
                for i, (v, s, score) in enumerate(runs)
            ]
            return refitter.fit(records)

        seed, golden = self.seed, dict(DEFAULT)
        golden_score = submit(golden, seed)
        step = 0
        while len(runs) < self.budget:
            columns = ENTRY_COLUMNS[step % len(ENTRY_COLUMNS)]
            step += 1
            tried = {
                tuple(v[c] for c in columns)
                for v, s, _ in runs
                if s == seed and all(v[c] == golden[c] for c in COLUMNS if c not in columns)
            }
            current = tuple(golden[c] for c in columns)
            open_ = [c for c in _choices(columns, rng) if c not in tried and c != current]
            if not open_:
                continue
            pick = rng.choice(open_)
            if self.proposer == "model":
                try:
                    fitted = model()
                    points = [
                        tuple({**golden, **dict(zip(columns, c, strict=True))}[k] for k in COLUMNS)
                        for c in open_
                    ]
                    gains = expected_improvement(
                        fitted.predict(points), fitted.recommend().estimate.mean
                    )
                    pick = open_[int(np.argmax(gains))]
                except TooFewRuns:
                    pass
            challenger = {**golden, **dict(zip(columns, pick, strict=True))}
            score = submit(challenger, seed)
            if score > golden_score:
                golden, golden_score = challenger, score
            if self.follow:
                try:
                    fitted = model()
                except TooFewRuns:
                    continue
                on_seed = {tuple(v[c] for c in COLUMNS) for v, s, _ in runs if s == seed}
                best = fitted.recommend(among=on_seed).values
                golden = dict(zip(COLUMNS, best, strict=True))
                golden_score = next(
                    sc for v, s, sc in runs if s == seed and tuple(v[c] for c in COLUMNS) == best
                )
        return golden


def one(job: tuple[str, str, bool, int, int]) -> tuple[str, str, float]:
    name, proposer, follow, repeat, budget = job
    surface = SURFACES[name]
    found = Loop(surface, 1970 + repeat, budget, proposer, follow).run()
    label = proposer + ("@follow" if follow else "")
    return name, label, surface.mean(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--surfaces", default=",".join(SURFACES))
    parser.add_argument("--repeats", type=int, default=16)
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    names = args.surfaces.split(",")
    designs = [("random", False), ("model", False), ("model", True)]
    jobs = [
        (n, p, f, r, args.budget) for n in names for p, f in designs for r in range(args.repeats)
    ]
    found: dict[tuple[str, str], list[float]] = {}
    with ProcessPoolExecutor(args.workers) as pool:
        for name, label, mean in pool.map(one, jobs):
            found.setdefault((name, label), []).append(mean)
    print(f"budget {args.budget}, {args.repeats} repeats; share of the headroom [95% bootstrap]")
    for name in names:
        default, best = SURFACES[name].mean(DEFAULT), best_legal(SURFACES[name])
        print(f"{name}: default {default:.2f}, best legal {best:.2f}")
        for (surface, label), means in sorted(found.items()):
            if surface != name:
                continue
            data = np.asarray(means)
            rng = np.random.default_rng(0)
            boot = rng.choice(data, (4000, len(data))).mean(axis=1)
            low, high = np.percentile(boot, [2.5, 97.5])
            share = [100 * (x - default) / (best - default) for x in (data.mean(), low, high)]
            print(f"  {label:<14} {share[0]:+6.1f}% [{share[1]:+.1f}, {share[2]:+.1f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
