"""``ax3l-compare``: does a proposer beat another on this problem? Each proposer's experiment is
run ``--repeats`` times, each for ``--budget`` SnakeLab runs, its recommendation re-tested on
held-out seeds, and compared with the untuned default and with TPE, paired by repeat.

    ax3l-compare --proposers random,tpe --repeats 10 --budget 50 [--retest 5] [--csv out.csv]
    ax3l-compare --proposers tpe,llm --url http://127.0.0.1:27770 --repeats 2 --budget 10
    ax3l-compare --proposers tpe,tpe@confirm,random,random@confirm --no-control

A proposer may carry a promotion policy (``arms.py``): ``X@confirm`` runs ``X``'s orchestrator
with ``AX3L_PROMOTION=confirm``, ``X`` (``X@single``) with ``single``.

Every repeat starts from SnakeLab's default configuration on its own seed (``--seed`` plus the
repeat's number: repeat i of every proposer shares a seed) with its own throwaway databases, a
reference SnakeLab on the calibrated surrogate (``--surrogate-seconds``, 0 by default), a
toolbroker and an orchestrator with ``AX3L_PROPOSER`` set to the proposer: the real loop, the
real MCP path. The budget counts SnakeLab's runs, the seeding run included (run 1). Then each
repeat's recommendation (its final golden configuration; at ``--retest-at`` run counts too)
runs on ``--retest`` held-out seeds (``retest.py``), outside the budget; the control arm
``default`` (unless ``--no-control``) recommends the default configuration. Results go to
Ax3l's database (``comparisons``, ``comparison_repeats``, ``comparison_retests``; the report's
``/comparison``) and, with ``--csv``, to a file. Exit 0 when every repeat finished, 1 when one
failed, 2 on bad arguments or settings.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ax3l.compare import results
from ax3l.compare.arms import CONFIRM, RACE, ArmError, parse_arm, policy_pairs
from ax3l.compare.executor import Executor, ExecutorUnavailable, LocalExecutor, RepeatJob
from ax3l.compare.promotions import PromotionFigures
from ax3l.compare.recommend import CHOICES, GOLDEN
from ax3l.compare.repeat import RepeatPlan, RepeatResult
from ax3l.compare.retest import check_disjoint, held_out_seeds, retest_points
from ax3l.compare.settings import CompareSettings, effective_env, load_settings
from ax3l.compare.throwaway import (
    AdminLoginMissing,
    admin_connection,
    comparison_token,
    drop_pairs,
)
from ax3l.compare.version import VersionMismatch, ax3l_version
from ax3l.shared import comparison_stats as stats
from ax3l.shared.comparison_conclusion import conclusion
from ax3l.shared.comparison_stats import CONTROL
from ax3l.shared.db import comparisons
from ax3l.shared.db.cli import connect, ensure_schema
from ax3l.shared.db.errors import DatabaseError
from ax3l.shared.settings import PROPOSER_NAMES
from ax3l.shared.wasted import WASTE_KINDS

DEFAULT_SEED = 1970
DEFAULT_RETESTS = 5
BASELINE = "random"


def proposer_names() -> tuple[str, ...]:
    """Whatever the orchestrator accepts as ``AX3L_PROPOSER`` (its list, not a copy of it)."""
    return PROPOSER_NAMES


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ax3l-compare",
        description=" ".join((__doc__ or "").split("\n\n")[0].split()).replace("``", ""),
    )
    parser.add_argument(
        "--proposers",
        required=True,
        help="comma-separated, e.g. random,tpe,llm,llm+tpe; X@confirm runs X under"
        " AX3L_PROMOTION=confirm (X, X@single: single)",
    )
    parser.add_argument("--repeats", type=int, default=10, help="repeats per proposer (10)")
    parser.add_argument(
        "--budget", type=int, default=50, help="SnakeLab runs per repeat, seeding included (50)"
    )
    parser.add_argument("--url", help="model server for proposers that use one (AX3L_LLM_URL)")
    parser.add_argument(
        "--parallel",
        type=int,
        help="repeats side by side (AX3L_COMPARE_PARALLEL, else 2 x cores; cores/2 with a model)",
    )
    parser.add_argument("--csv", type=Path, help="also write the results to this CSV file")
    parser.add_argument(
        "--json",
        type=Path,
        help="also write the verdict to this JSON file (for scripts and CI; docs/user-guide.md)",
    )
    parser.add_argument(
        "--recommend",
        choices=CHOICES,
        default=GOLDEN,
        help="what a repeat hands over for its held-out re-test: its final golden (golden, the"
        " default) or the evaluated configuration the model of every run predicts best (model)",
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="seed of repeat 0; repeat i runs seed+i"
    )
    parser.add_argument(
        "--surrogate-seconds", type=float, default=0.0, help="wall time of one surrogate run (0)"
    )
    parser.add_argument(
        "--repeat-timeout", type=float, default=3600.0, help="seconds one repeat may take (3600)"
    )
    parser.add_argument(
        "--db-env",
        type=Path,
        help="read settings from this KEY=value file first (e.g. .run/db.env); exported wins",
    )
    parser.add_argument("--logs", type=Path, help="keep every repeat's service logs here")
    parser.add_argument(
        "--spawn",
        choices=("fork", "exec"),
        default="fork",
        help="start the services forked from one pre-imported process (fork, the default) or"
        " each as a fresh python -m (exec)",
    )
    parser.add_argument(
        "--snakelab-hosts",
        type=int,
        default=1,
        help="reference SnakeLab processes per repeat, sharing its database (1); with more,"
        " the runs it submits together (re-tests, confirmations) train side by side",
    )
    parser.add_argument(
        "--retest",
        type=int,
        default=DEFAULT_RETESTS,
        help="held-out seeds each recommendation is re-tested on (5; 0: no re-test)",
    )
    parser.add_argument(
        "--retest-at",
        default="",
        help="also re-test the recommendation after these run counts, e.g. 10,25 (curves)",
    )
    parser.add_argument(
        "--no-control",
        action="store_true",
        help=f"leave out the control arm {CONTROL!r} (the default configuration, never tuned)",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run each repeat as a task on the Ray cluster at ADDRESS (auto: Ray's own"
        " discovery, RAY_ADDRESS or the local ray start); needs ax3l-compare[ray]",
    )
    parser.add_argument(
        "--ray-resource",
        default="CPU=1",
        help="what each repeat's Ray task asks for, NAME=AMOUNT (CPU=1; e.g. snakelab=1)",
    )
    parser.add_argument(
        "--ray-retries",
        type=int,
        default=2,
        help="times Ray runs a repeat again after its node was lost (2)",
    )
    parser.add_argument(
        "--pairs",
        default="",
        help="more paired comparisons, e.g. llm:random,llm+tpe:llm (each proposer is paired"
        " with default and tpe anyway)",
    )
    return parser.parse_args(argv)


class UsageError(ValueError):
    pass


def check_args(args: argparse.Namespace, env: dict[str, str]) -> list[str]:
    """The arms to run (``arms.py``: a proposer, ``X@confirm``), the control arm first unless
    ``--no-control``."""
    try:
        arms = [parse_arm(p) for p in args.proposers.split(",") if p.strip()]
    except ArmError as exc:
        raise UsageError(str(exc)) from None
    proposers = [arm.name for arm in arms]
    known = (*proposer_names(), CONTROL)
    unknown = [a.name for a in arms if a.proposer not in known]
    if unknown:
        raise UsageError(
            f"unknown proposer {', '.join(unknown)}: the orchestrator accepts"
            f" {', '.join(proposer_names())}, and {CONTROL} is the control arm"
        )
    if len(set(proposers)) != len(proposers) or not proposers:
        raise UsageError("--proposers needs one or more distinct names")
    if not args.no_control and CONTROL not in proposers:
        proposers.insert(0, CONTROL)
    if args.repeats < 1 or args.budget < 1:
        raise UsageError("--repeats and --budget must be at least 1")
    if args.parallel is not None and args.parallel < 1:
        raise UsageError("--parallel must be at least 1")
    if args.retest < 0:
        raise UsageError("--retest must be 0 or more")
    if args.snakelab_hosts < 1:
        raise UsageError("--snakelab-hosts must be at least 1")
    if args.ray_retries < 0:
        raise UsageError("--ray-retries must be 0 or more")
    try:
        check_disjoint(
            args.seed, args.repeats, args.budget, args.retest, confirm_seeds(proposers, env)
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    retest_at(args)
    named_pairs(args, proposers)
    url = args.url or env.get("AX3L_LLM_URL")
    needing = [p for p in proposers if uses_model(p)]
    if needing and not url:
        raise UsageError(f"{', '.join(needing)} needs a model server: --url or AX3L_LLM_URL")
    return proposers


def confirm_seeds(proposers: list[str], env: dict[str, str]) -> int:
    """The most trial seeds any arm's orchestrator may run beyond seed + 1,000,000:
    ``AX3L_CONFIRM_SEEDS`` for a confirm arm, ``AX3L_RACE_MAX_SEEDS`` for a race arm; 0 without
    either."""
    policies = {parse_arm(p).promotion for p in proposers}
    if not policies & {CONFIRM, RACE}:
        return 0
    try:
        settings = load_settings(env)
    except ValueError as exc:  # pydantic's ValidationError
        raise UsageError(f"AX3L_CONFIRM_SEEDS or AX3L_RACE_MAX_SEEDS: {exc}") from None
    found = [settings.confirm_seeds if CONFIRM in policies else 0]
    found.append(settings.race_max_seeds if RACE in policies else 0)
    return max(found)


def uses_model(proposer: str) -> bool:
    """Whether the proposer asks the model server (``llm``, ``llm+tpe``...)."""
    return "llm" in proposer


def retest_at(args: argparse.Namespace) -> list[int]:
    """``--retest-at`` as run counts within the budget, plus the budget."""
    try:
        at = [int(v) for v in args.retest_at.split(",") if v.strip()]
    except ValueError:
        raise UsageError("--retest-at needs run counts, e.g. 10,25") from None
    if any(b < 1 or b > args.budget for b in at):
        raise UsageError(f"--retest-at run counts must be within 1..{args.budget}")
    return retest_points(args.budget, at)


def named_pairs(args: argparse.Namespace, proposers: list[str]) -> list[tuple[str, str]]:
    """``--pairs`` as (A, B) of arms of this comparison (``X@single`` is ``X``)."""
    found = []
    for text in (t.strip() for t in args.pairs.split(",") if t.strip()):
        a, _, b = text.partition(":")
        with contextlib.suppress(ArmError):
            a, b = parse_arm(a).name, parse_arm(b).name
        if a not in proposers or b not in proposers or a == b:
            raise UsageError(f"--pairs {text}: both sides must be different proposers run here")
        found.append((a, b))
    return found


def plans(
    proposers: list[str],
    repeats: int,
    budget: int,
    seed: int,
    retest: int = 0,
    retest_at: tuple[int, ...] = (),
    recommend: str = GOLDEN,
    trial_seeds: int = 0,
) -> list[RepeatPlan]:
    """Repeat 0 of every proposer, then repeat 1...: partial results stay balanced. Each repeat
    re-tests on ``retest`` held-out seeds of its own, the same for every arm
    (``retest.held_out_seeds``)."""
    return [
        RepeatPlan(
            proposer,
            index,
            seed + index,
            budget,
            tuple(held_out_seeds(seed, retest, trial_seeds, index)) if retest else (),
            retest_at,
            recommend,
        )
        for index in range(repeats)
        for proposer in proposers
    ]


def verdict_lines(
    done: list[RepeatResult], proposers: list[str], pairs: list[tuple[str, str]]
) -> list[str]:
    """The held-out verdict (what the report's /comparison leads with): per proposer the IQM of
    the repeats' held-out means with its 95% bootstrap interval, their mean and median, the
    best observed and the optimism gap; then each pair's median paired difference."""
    verdicts = _verdicts(done, proposers)
    w = _width(proposers)
    lines = [
        "held-out verdict (final recommendation re-tested on held-out seeds):",
        f"{'proposer':<{w}} {'repeats':>7} {'IQM':>6} {'95% CI':>15} {'mean':>6} {'median':>6}"
        f" {'best observed':>13} {'optimism gap':>12} {'expected*':>9}",
    ]
    for proposer in proposers:
        found = stats.proposer_verdict(proposer, verdicts[proposer])
        if found is None:
            lines.append(f"{proposer:<{w}} {0:>7} {'no re-tests':>15}")
            continue
        lines.append(
            f"{proposer:<{w}} {found.repeats:>7} {found.iqm.value:>6.2f}"
            f" {_interval(found.iqm.low, found.iqm.high, signed=False):>15}"
            f" {found.held_out_mean:>6.2f}"
            f" {found.held_out_median:>6.2f} {_number(found.best_observed, 2):>13}"
            f" {_number(found.optimism_gap, 2):>12} {_number(found.expected_score, 2):>9}"
        )
    lines.append("* the surrogate's noise-free expected score: ground truth a real SnakeLab lacks")
    lines += _curve_lines(done, proposers)
    table = stats.paired_table(verdicts, pairs)
    if table:
        lines.append("paired differences of held-out means (A - B, repeat by repeat):")
        lines.append(
            f"{'A':<{w}} {'B':<{w}} {'repeats':>7} {'median diff':>11} {'95% CI':>15}"
            f" {'P(A beats B)':>12}"
        )
        for pair in table:
            lines.append(
                f"{pair.a:<{w}} {pair.b:<{w}} {pair.repeats:>7} {pair.median_difference:>+11.2f}"
                f" {_interval(pair.low, pair.high):>15} {pair.p_a_beats_b:>12.2f}"
            )
    lines.append(f"conclusion: {conclusion(table)}")
    return lines


def _curve_lines(done: list[RepeatResult], proposers: list[str]) -> list[str]:
    """With --retest-at: per proposer the held-out IQM [95% interval] after each run count."""
    finished = [r for r in done if r.state == "finished"]
    points = sorted({p.recommendation.at_runs for r in finished for p in r.retests})
    if len(points) < 2:
        return []
    w = _width(proposers)
    lines = ["held-out IQM [95% interval] of the recommendation after each run count:"]
    lines.append(f"{'proposer':<{w}} " + " ".join(f"{b:>21}" for b in points))
    for proposer in proposers:
        cells = []
        for b in points:
            means = [
                m
                for r in _finished(done, proposer)
                for p in r.retests
                if p.recommendation.at_runs == b and (m := p.mean) is not None
            ]
            if means:
                found = stats.iqm_estimate(means)
                cells.append(f"{found.value:.2f} [{found.low:.2f}, {found.high:.2f}]")
            else:
                cells.append("–")
        lines.append(f"{proposer:<{w}} " + " ".join(f"{c:>21}" for c in cells))
    return lines


def _finished(done: list[RepeatResult], proposer: str) -> list[RepeatResult]:
    """The arm's repeats that finished (a failed one has no figures)."""
    return [r for r in done if r.plan.proposer == proposer and r.state == "finished"]


def _verdicts(
    done: list[RepeatResult], proposers: list[str]
) -> dict[str, list[stats.RepeatVerdict]]:
    return {p: [r.verdict() for r in _finished(done, p)] for p in proposers}


def _width(proposers: list[str]) -> int:
    """The first column's width: the longest arm name (``random@confirm``), at least 10."""
    return max([10, *map(len, proposers)])


def _interval(low: float, high: float, *, signed: bool = True) -> str:
    return f"[{low:+.2f}, {high:+.2f}]" if signed else f"[{low:.2f}, {high:.2f}]"


def summary_lines(done: list[RepeatResult], proposers: list[str], budget: int) -> list[str]:
    """The observed-best table printed after the verdict (the report's second table)."""
    mine_of = {p: _finished(done, p) for p in proposers}
    finals = {p: [stats.final_best(r.curve, budget) for r in mine_of[p]] for p in proposers}
    w = _width(proposers)
    lines = [
        "best observed while tuning (secondary: the luckiest run, not the recommendation):",
        f"{'proposer':<{w}} {'repeats':>7} {'median best':>11} {'95% band':>13}"
        f" {'P(beats random)':>15} {'wasted/accepted':>15} {'wall/repeat':>11}",
    ]
    for proposer, mine in mine_of.items():
        values = [float(v) for v in finals[proposer] if v is not None]
        beat = (
            stats.probability_of_beating(finals[proposer], finals[BASELINE])
            if BASELINE in finals and proposer != BASELINE
            else None
        )
        accepted = sum(r.turns.accepted_proposals for r in mine)
        wasted = sum(r.turns.wasted_turns for r in mine)
        walls = [r.wall_seconds for r in mine]
        lines.append(
            f"{proposer:<{w}} {len(mine):>7}"
            f" {_number(stats.median(values) if values else None):>11}"
            f" {_band(values):>13}"
            f" {_number(beat, 2):>15}"
            f" {_number(wasted / accepted if accepted else None, 3):>15}"
            f" {_number(stats.median(walls) if walls else None, 1):>10}s"
        )
    return lines


def wasted_reasons(mine: list[RepeatResult]) -> dict[str, int]:
    """Wasted turns of these repeats by reason (``ax3l.shared.wasted``)."""
    found: Counter[str] = Counter()
    for result in mine:
        found.update(result.turns.wasted_reasons)
    return dict(sorted(found.items()))


def wasted_lines(done: list[RepeatResult], proposers: list[str]) -> list[str]:
    """Per arm that wasted any turn: its wasted turns by reason, in all over its repeats."""
    by_arm = {p: wasted_reasons(_finished(done, p)) for p in proposers}
    reasons = [k for k in WASTE_KINDS if any(k in r for r in by_arm.values())]
    reasons += sorted({k for r in by_arm.values() for k in r} - set(reasons))
    if not reasons:
        return []
    w = _width(proposers)
    lines = [
        "wasted turns by reason (all repeats):",
        f"{'proposer':<{w}} " + " ".join(f"{reason:>{max(8, len(reason))}}" for reason in reasons),
    ]
    for proposer, found in by_arm.items():
        if found:
            counts = " ".join(
                f"{found.get(reason, 0):>{max(8, len(reason))}}" for reason in reasons
            )
            lines.append(f"{proposer:<{w}} {counts}")
    return lines


def promotion_lines(done: list[RepeatResult], proposers: list[str]) -> list[str]:
    """Per tuned arm: its promotion policy, promotions per repeat, how many of them raised the
    surrogate's expected score over the golden they replaced, runs spent on confirmations per
    repeat and candidates not confirmed (retained) per repeat, all within the budget."""
    tuned = [p for p in proposers if p != CONTROL]
    if not tuned:
        return []
    w = _width(proposers)
    lines = [
        "promotions within the budget (per repeat; confirmation runs count in the budget):",
        f"{'proposer':<{w}} {'policy':>7} {'repeats':>7} {'promotions':>10}"
        f" {'raised expected*':>17} {'confirmation runs':>17} {'not confirmed':>13}",
    ]
    for proposer in tuned:
        figures = [r.promotions for r in _finished(done, proposer) if r.promotions is not None]
        if not figures:
            lines.append(f"{proposer:<{w}} {parse_arm(proposer).promotion:>7} {0:>7}")
            continue
        lines.append(
            f"{proposer:<{w}} {figures[0].policy:>7} {len(figures):>7}"
            f" {_per_repeat(figures, lambda f: f.promotions):>10}"
            f" {_improved_share(figures):>17}"
            f" {_per_repeat(figures, lambda f: f.confirmation_runs):>17}"
            f" {_per_repeat(figures, lambda f: f.confirmations.get('retained', 0)):>13}"
        )
    lines.append(
        "* raised expected*: promotions whose new golden has a higher noise-free expected score"
        " (the surrogate's) than the golden it replaced: ground truth a real SnakeLab lacks"
    )
    return lines


def _per_repeat(figures: list[PromotionFigures], value: Callable[[PromotionFigures], int]) -> str:
    return f"{sum(map(value, figures)) / len(figures):.2f}"


def _improved_share(figures: list[PromotionFigures]) -> str:
    checks = [c for f in figures for c in f.checks or []]
    if not checks:
        return "–"
    up = sum(c.improved for c in checks)
    return f"{up}/{len(checks)} ({100 * up / len(checks):.0f}%)"


def _number(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _band(values: list[float]) -> str:
    if not values:
        return "–"
    return f"[{stats.quantile(values, 0.025):.1f}, {stats.quantile(values, 0.975):.1f}]"


def make_executor(args: argparse.Namespace, parallel: int) -> Executor:
    """``LocalExecutor`` (``--parallel`` side by side here) or, with ``--ray``, the Ray one."""
    if args.ray is None:
        return LocalExecutor(parallel)
    try:
        from ax3l.compare import ray_executor
    except ImportError as exc:
        if not (exc.name or "").startswith("ray"):
            raise
        raise UsageError(
            "--ray needs Ray, the optional extra: pip install 'ax3l-compare[ray]' (in this"
            " repository: uv sync --all-packages --extra ray) on this machine and every node"
        ) from None
    try:
        resource = ray_executor.ResourceRequest.parse(args.ray_resource)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return ray_executor.RayExecutor(args.ray, resource, args.ray_retries)


def _drop_left(settings: CompareSettings, token: str) -> None:
    """Drop the database pairs the comparison's repeats left (a task killed or whose node was
    lost before it could drop its own); a failure to is reported, never raised."""
    try:
        left = drop_pairs(settings, token)
    except Exception as exc:
        print(f"ax3l-compare: could not drop the databases {token}*: {exc}", file=sys.stderr)
        return
    if left:
        print(
            f"ax3l-compare: dropped {len(left)} database pair(s) the repeats left:"
            f" {', '.join(left)}",
            file=sys.stderr,
        )


def run_comparison(args: argparse.Namespace, environ: dict[str, str]) -> int:
    env = effective_env(args.db_env, environ)
    proposers = check_args(args, env)
    settings: CompareSettings = load_settings(env)
    admin_connection(settings).close()  # fail early without a login that can create databases
    ensure_schema(settings)
    parallel = args.parallel or settings.default_parallel(any(map(uses_model, proposers)))
    executor = make_executor(args, parallel)
    executor.prepare()  # fail early: a cluster that does not answer or lacks the resource
    url = args.url or env.get("AX3L_LLM_URL")
    confirming = confirm_seeds(proposers, env)
    points = tuple(retest_at(args)) if args.retest else ()
    pairs = stats.pairs_to_compare(
        proposers, [*policy_pairs(proposers), *named_pairs(args, proposers)]
    )
    if env.get("AX3L_PROMOTION"):
        print(
            f"ax3l-compare: AX3L_PROMOTION={env['AX3L_PROMOTION']} is ignored: each arm's"
            " orchestrator gets its own policy (X: single, X@confirm: confirm)",
            file=sys.stderr,
        )
    if args.ray is not None and args.parallel is not None:
        print(
            "ax3l-compare: --parallel is ignored with --ray: the cluster's resources decide how"
            " many repeats run at once (--ray-resource)",
            file=sys.stderr,
        )
    work = plans(
        proposers,
        args.repeats,
        args.budget,
        args.seed,
        args.retest,
        points,
        args.recommend,
        confirming,
    )
    seeds = sorted({s for plan in work for s in plan.retest_seeds})
    job = RepeatJob(
        env,
        url,
        args.surrogate_seconds,
        args.repeat_timeout,
        comparison_token(),
        ax3l_version(),
        args.logs,
        args.spawn,
        args.snakelab_hosts,
    )
    content: dict[str, Any] = {
        "seeds": [args.seed, args.seed + args.repeats - 1],
        "parallel": parallel if args.ray is None else None,
        "executor": _executor_content(args),
        "databases": job.databases,
        "surrogate_seconds": args.surrogate_seconds,
        "snakelab_hosts": args.snakelab_hosts,
        "trainer": "surrogate",
        "url": url,
        "llm_model": settings.llm_model,
        "ax3l_version": settings.ax3l_version,
        "version": job.version,
        "settings": {k: v for k, v in env.items() if k.startswith(("AX3L_LLM_", "AX3L_MAX_"))},
        "retest": {
            "seeds": seeds,
            "per_repeat": args.retest,
            "at": list(points),
            "control": CONTROL in proposers,
        },
        "recommend": args.recommend,
        "pairs": [list(pair) for pair in pairs],
        "promotion": {
            "arms": {p: parse_arm(p).promotion for p in proposers if p != CONTROL},
            "confirm_seeds": confirming or None,
        },
    }
    began = time.monotonic()
    conn = connect(settings)
    done: list[RepeatResult] = []
    comparison_id: int | None = None
    state = "failed"
    try:
        comparison_id = comparisons.create_comparison(
            conn, proposers, args.repeats, args.budget, content
        )
        print(
            f"comparison {comparison_id}: {', '.join(proposers)} x {args.repeats} repeats x"
            f" {args.budget} runs, {executor.describe()}; logs in {job.log_root}",
            flush=True,
        )
        try:
            executor.submit(work, job)
            for result in executor.completed():
                done.append(result)
                results.store_repeat(conn, comparison_id, result)
                _report(result, len(done), len(work))
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                print(
                    "ax3l-compare: interrupted: the repeats stop their services and drop their"
                    " databases",
                    file=sys.stderr,
                    flush=True,
                )
            executor.cancel()  # the running repeats stop their services and drop their databases
            raise
        finally:
            executor.close()
            _drop_left(settings, job.databases)
        state = "finished" if all(r.state == "finished" for r in done) else "partial"
    finally:
        wall = time.monotonic() - began
        if comparison_id is not None:
            comparisons.finish_comparison(conn, comparison_id, state, wall)
            if args.csv is not None:
                results.export_csv(conn, comparison_id, args.csv)
            if args.json is not None:
                write_json(args.json, verdict_json(done, proposers, pairs, args, wall))
        conn.close()
    failed = [r for r in done if r.state != "finished"]
    for line in [
        *(verdict_lines(done, proposers, pairs) if seeds else []),
        *summary_lines(done, proposers, args.budget),
        *wasted_lines(done, proposers),
        *promotion_lines(done, proposers),
        *placement_lines(done),
    ]:
        print(line)
    print(f"wall time of the whole comparison: {wall:.1f} s")
    if args.csv is not None:
        print(f"CSV: {args.csv}")
    if args.json is not None:
        print(f"JSON: {args.json}")
    if failed:
        where = "on their nodes " if args.ray is not None else ""
        print(
            f"{len(failed)} repeat(s) failed; their logs are {where}in {job.log_root}",
            file=sys.stderr,
        )
        return 1
    if args.logs is None:
        shutil.rmtree(job.log_root, True)
    return 0


def verdict_json(
    done: list[RepeatResult],
    proposers: list[str],
    pairs: list[tuple[str, str]],
    args: argparse.Namespace,
    wall: float,
) -> dict[str, Any]:
    """The verdict for scripts and CI (``--json``): per arm its held-out IQM with its interval,
    its paired difference against ``default``, the mean expected score of its recommendations
    (the surrogate's ground truth; null elsewhere), its wasted turns and wall time."""
    verdicts = _verdicts(done, proposers)
    against = {
        pair.a: pair
        for pair in stats.paired_table(verdicts, [(p, CONTROL) for p in proposers if p != CONTROL])
        if pair.b == CONTROL
    }
    arms = []
    for proposer in proposers:
        mine = _finished(done, proposer)
        found = stats.proposer_verdict(proposer, verdicts[proposer])
        versus = against.get(proposer)
        expected = [v.expected_score for v in verdicts[proposer] if v.expected_score is not None]
        goldens = [g for r in mine if (g := r.golden_expected_score) is not None]
        walls = [r.wall_seconds for r in mine]
        arms.append(
            {
                "arm": proposer,
                "repeats": len(mine),
                "heldout_iqm": None
                if found is None
                else {"value": found.iqm.value, "ci": [found.iqm.low, found.iqm.high]},
                "heldout_mean": None if found is None else found.held_out_mean,
                "vs_default": None
                if versus is None
                else {
                    "median": versus.median_difference,
                    "ci": [versus.low, versus.high],
                    "p_beats": versus.p_a_beats_b,
                },
                "expected_score_mean": stats.mean(expected) if expected else None,
                "expected_scores": expected or None,
                # under --recommend model: what the final goldens would have scored instead
                "golden_expected_scores": goldens or None,
                "best_observed_mean": None if found is None else found.best_observed,
                "accepted_proposals": sum(r.turns.accepted_proposals for r in mine),
                "wasted_turns": sum(r.turns.wasted_turns for r in mine),
                "wasted_by_reason": wasted_reasons(mine),
                "wall_seconds_per_repeat": stats.median(walls) if walls else None,
            }
        )
    table = stats.paired_table(verdicts, pairs)
    return {
        "seconds": round(wall, 1),
        "budget": args.budget,
        "repeats": args.repeats,
        "retest": args.retest,
        "recommend": args.recommend,
        "seed": args.seed,
        "trainer": "surrogate",
        "arms": arms,
        "pairs": [
            {
                "a": pair.a,
                "b": pair.b,
                "repeats": pair.repeats,
                "median": pair.median_difference,
                "ci": [pair.low, pair.high],
                "p_a_beats_b": pair.p_a_beats_b,
            }
            for pair in table
        ],
        "conclusion": conclusion(table),
        "failed_repeats": sum(1 for r in done if r.state != "finished"),
    }


def write_json(path: Path, verdict: dict[str, Any]) -> None:
    """The verdict as JSON, written whole (a reader never sees half a file)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(verdict, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)


def _executor_content(args: argparse.Namespace) -> dict[str, Any]:
    if args.ray is None:
        return {"kind": "local", "spawn": args.spawn}
    return {
        "kind": "ray",
        "address": args.ray,
        "resource": args.ray_resource,
        "retries": args.ray_retries,
    }


def placement_lines(done: list[RepeatResult]) -> list[str]:
    """Under ``--ray``: how many repeats each node ran, and the repeats run again."""
    nodes = Counter(
        (r.placement.node_id, r.placement.host)
        for r in done
        if r.placement is not None and r.placement.node_id is not None
    )
    if not nodes:
        return []
    lines = ["placement (Ray nodes):"]
    for (node_id, host), count in sorted(nodes.items(), key=lambda item: -item[1]):
        lines.append(f"  node {str(node_id)[:12]} on {host}: {count} repeat(s)")
    again = sum(r.placement.dropped_earlier for r in done if r.placement is not None)
    if again:
        lines.append(f"  {again} database pair(s) of attempts on lost nodes dropped by re-runs")
    return lines


def _report(result: RepeatResult, number: int, total: int) -> None:
    plan, turns, promoted = result.plan, result.turns, result.promotions
    where = _where(result)
    if result.state == "finished":
        figures = ""
        if promoted is not None:
            figures = f", promotions {promoted.promotions}"
            if promoted.confirmation_runs:
                figures += f" (confirmation runs {promoted.confirmation_runs})"
        print(
            f"[{number}/{total}] {plan.proposer} repeat {plan.index} (seed {plan.seed}):"
            f" best {result.best} after {len(result.scores)} runs, {turns.accepted_proposals}"
            f" accepted, {turns.wasted_turns} wasted turns{figures},"
            f" {result.wall_seconds:.1f} s{where}",
            flush=True,
        )
    else:
        print(
            f"[{number}/{total}] {plan.proposer} repeat {plan.index} (seed {plan.seed}){where}"
            f" FAILED: {result.error}",
            file=sys.stderr,
            flush=True,
        )


def _where(result: RepeatResult) -> str:
    """`` on node <id> (<host>)`` for a repeat run on a Ray node, and whether it ran again."""
    placed = result.placement
    if placed is None or placed.node_id is None:
        return ""
    again = ", re-run after a lost node" if placed.dropped_earlier else ""
    return f" on node {placed.node_id[:12]} ({placed.host}{again})"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM (kill, a supervisor, CI's timeout) stops the repeats' services and drops their
    # databases exactly like Ctrl-C; without this the services would outlive the comparison.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return run_comparison(args, dict(os.environ))
    except (UsageError, AdminLoginMissing) as exc:
        print(f"ax3l-compare: {exc}", file=sys.stderr)
        return 2
    except (DatabaseError, ExecutorUnavailable, VersionMismatch) as exc:
        print(f"ax3l-compare: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
