"""Answers worth having: how much of the surrogate's headroom each arm's recommendations capture,
their held-out verdict, how often a race or a confirmation promotes an equal challenger, and
what the comparison costs.

**Share of headroom** = (mean expected score of the recommendations - the default's) / (the best
legal configuration's - the default's). The expected score is the surrogate's noise-free mean
over seeds (``expected_high_score``): ground truth a real SnakeLab never has. The best legal
configuration is found here by coordinate search over the legal grid (every value of a finite
domain, ``GRID`` values of a continuous one, sweeps until nothing improves). The interval is a
bootstrap over the repeats.

For each budget and ``--recommend`` mode it runs ``ax3l-compare --json`` on the private MariaDB
(``.run/db.env``, the 0 s surrogate) and prints per arm: the share [95% interval], the held-out
IQM [interval], the paired difference against ``default`` [interval] and P(beats default), the
wasted turns and the median wall time of a repeat; then the comparison's wall time. Under
``--recommend model`` it also prints the share the arm's final *golden* would have captured.

The false-promotion rate: a challenger equal to the golden in truth (the default configuration
with its learning rate moved by 1e-8: the same expected score to 1e-4, its own noise on each
seed) beats the golden's run on the current seed, then is tried on the same seeds as the
golden by the loop's own rules (``racing.race_verdict``; confirm's mean over 1 +
``AX3L_CONFIRM_SEEDS``), ``--draws`` times on fresh seeds.

    .venv/bin/python bench/bench_answers.py                       # the issue's full size
    .venv/bin/python bench/bench_answers.py --budgets 50 --repeats 4 --arms default,model@follow

What it does not show: the surrogate is one response surface, fitted to one user's runs; a
real SnakeLab's (or another surface's) shares differ. The share is of the expected score of
what was recommended, not of what a user would see on a few runs.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ax3l.orchestrator.racing import confirmation_seeds, race_rounds, race_verdict
from ax3l.shared.config_schema import cached_schema
from ax3l.shared.registry import TUNED_PATHS, leaf_domain
from snakelab.trainers.surrogate import expected_high_score, predict_high_score

REPO = Path(__file__).resolve().parents[1]
ARMS = "default,tpe,model,tpe@race,model@race,model@follow"
GRID = 200
RESAMPLES = 4000


def best_legal() -> tuple[float, dict[str, Any]]:
    """The best expected score over the legal grid, by coordinate search from the default."""
    schema = cached_schema()
    config = schema.default_config()
    grids = {}
    for path in TUNED_PATHS:
        leaf = schema.by_path[path]
        domain = leaf_domain(leaf)
        if domain is not None:
            grids[path] = [int(v) if leaf.type == "integer" else float(v) for v in domain]
        else:
            assert leaf.minimum is not None and leaf.maximum is not None
            grids[path] = [float(v) for v in np.linspace(leaf.minimum, leaf.maximum, GRID)]
    best = expected_high_score(config)
    improved = True
    while improved:
        improved = False
        for path, values in grids.items():
            for value in values:
                trial = schema.with_values(config, {path: value})
                score = expected_high_score(trial)
                if score > best + 1e-9:
                    best, config, improved = score, trial, True
    return best, config


def share(values: list[float], default: float, best: float) -> tuple[float, float, float]:
    """The share of the headroom of the values' mean, with a bootstrap 95% interval."""
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(0)
    means = rng.choice(data, (RESAMPLES, len(data))).mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    width = best - default
    return (
        (float(data.mean()) - default) / width,
        (float(low) - default) / width,
        (float(high) - default) / width,
    )


def compare(args: argparse.Namespace, budget: int, recommend: str) -> dict[str, Any]:
    """One ``ax3l-compare`` run's JSON verdict (and its own wall time)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "verdict.json"
        command = [sys.executable, "-m", "ax3l.compare", "--db-env", str(args.db_env)]
        command += ["--proposers", args.arms, "--repeats", str(args.repeats)]
        command += ["--budget", str(budget), "--retest", str(args.retest)]
        command += ["--recommend", recommend, "--json", str(out), *args.extra]
        print("$ ax3l-compare " + " ".join(command[3:]), flush=True)
        began = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.monotonic() - began
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
            raise SystemExit(done.returncode)
        found: dict[str, Any] = json.loads(out.read_text())
        found["command_seconds"] = wall
        return found


def _cell(found: tuple[Any, Any, Any], percent: bool = False) -> str:
    value, low, high = found
    if value is None:
        return "–"
    scale = 100.0 if percent else 1.0
    unit = "%" if percent else ""
    return f"{value * scale:+.1f}{unit} [{low * scale:+.1f}, {high * scale:+.1f}]"


def report(verdict: dict[str, Any], default: float, best: float) -> None:
    print(
        f"budget {verdict['budget']}, --recommend {verdict['recommend']}, {verdict['repeats']}"
        f" repeats, {verdict['retest']} held-out seeds, {verdict['command_seconds']:.1f} s"
    )
    print(
        f"{'arm':<20} {'share of headroom':>22} {'golden share':>22} {'held-out IQM':>20}"
        f" {'vs default':>20} {'P(beats)':>8} {'wasted':>6} {'s/repeat':>8}"
    )
    for arm in verdict["arms"]:
        expected = arm.get("expected_scores") or []
        goldens = arm.get("golden_expected_scores") or []
        ours = share(expected, default, best) if expected else (None, None, None)
        theirs = share(goldens, default, best) if goldens else (None, None, None)
        iqm = arm.get("heldout_iqm") or {}
        versus = arm.get("vs_default") or {}
        print(
            f"{arm['arm']:<20} {_cell(ours, percent=True):>22}"
            f" {_cell(theirs, percent=True):>22}"
            f" {_cell((iqm.get('value'), *(iqm.get('ci') or [None, None]))):>20}"
            f" {_cell((versus.get('median'), *(versus.get('ci') or [None, None]))):>20}"
            f" {versus.get('p_beats', float('nan')):>8.2f} {arm.get('wasted_turns') or 0:>6}"
            f" {arm.get('wall_seconds_per_repeat') or 0:>8.1f}"
        )
    print(f"conclusion: {verdict['conclusion']}")
    print()


def _score(config: dict[str, Any], seed: int) -> int:
    return predict_high_score({**config, "seed": seed})


def false_promotions(draws: int, confirm_seeds: int, max_seeds: int, alpha: float) -> None:
    """How often each policy promotes a challenger equal to the golden in truth."""
    schema = cached_schema()
    config = schema.default_config()
    rate = float(schema.get(config, "training.learning_rate"))
    twin = schema.with_values(config, {"training.learning_rate": rate + 1e-8})
    assert abs(expected_high_score(twin) - expected_high_score(config)) < 1e-3
    rng = random.Random(11)
    promoted = {"race": 0, "confirm": 0}
    runs = {"race": 0, "confirm": 0}
    for _ in range(draws):
        # A race happens only when the challenger's run beat the golden's on the current seed.
        while True:
            seed = rng.randrange(10**6, 10**9)
            golden, challenger = _score(config, seed), _score(twin, seed)
            if challenger > golden:
                break
        extra = confirmation_seeds(seed, max(max_seeds, confirm_seeds))
        ours = [_score(twin, s) for s in extra]
        theirs = [_score(config, s) for s in extra]
        mean_ours = (challenger + sum(ours[:confirm_seeds])) / (1 + confirm_seeds)
        mean_theirs = (golden + sum(theirs[:confirm_seeds])) / (1 + confirm_seeds)
        promoted["confirm"] += mean_ours > mean_theirs
        runs["confirm"] += 2 * confirm_seeds
        done = 0
        for size in race_rounds(max_seeds):
            done += size
            verdict = race_verdict(ours[:done], theirs[:done], max_seeds, alpha).verdict
            if verdict is not None:
                promoted["race"] += verdict == "promoted"
                break
        runs["race"] += 2 * done
    print(f"equal challengers (the default configuration and its twin), {draws} trials each:")
    for policy in ("confirm", "race"):
        share = promoted[policy] / draws
        margin = 1.96 * (share * (1 - share) / draws) ** 0.5
        print(
            f"  {policy:<8} promoted {promoted[policy]:>5} ({100 * share:.1f}%"
            f" ± {100 * margin:.1f}), {runs[policy] / draws:.1f} runs per trial"
        )
    print(
        f"  (confirm: AX3L_CONFIRM_SEEDS={confirm_seeds}; race: AX3L_RACE_MAX_SEEDS={max_seeds},"
        f" AX3L_RACE_ALPHA={alpha})"
    )
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--arms", default=ARMS)
    parser.add_argument("--budgets", default="50,150")
    parser.add_argument("--recommend", default="golden,model")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--retest", type=int, default=5)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--db-env", type=Path, default=REPO / ".run" / "db.env")
    parser.add_argument("--no-compare", action="store_true", help="the false promotions only")
    parser.add_argument("extra", nargs="*", help="more ax3l-compare arguments (after --)")
    args = parser.parse_args()
    default = expected_high_score(cached_schema().default_config())
    best, config = best_legal()
    print(f"default configuration's expected score {default:.2f}; best legal {best:.2f}")
    print("  at " + ", ".join(f"{p}={cached_schema().get(config, p)}" for p in TUNED_PATHS))
    print()
    false_promotions(args.draws, 2, 8, 0.1)
    if args.no_compare:
        return 0
    for budget in (int(b) for b in args.budgets.split(",")):
        for recommend in args.recommend.split(","):
            report(compare(args, budget, recommend), default, best)
    return 0


if __name__ == "__main__":
    sys.exit(main())
