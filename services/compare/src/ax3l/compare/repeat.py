"""One repeat: a proposer's whole experiment, from the default configuration, on its own seed
and its own throwaway databases, through the real services and the real round-robin loop.

The budget counts SnakeLab's runs: the seeding run is run 1, and every later run counts
whoever submitted it (a proposal, a seed rotation's baseline, a retry of a run that never
trained). Once SnakeLab holds ``budget`` runs the orchestrator finishes the step of the last
one and is stopped (a run it began after that is cancelled); the repeat ends when the
``budget`` runs are terminal. Its best-so-far curve is read from SnakeLab's runs
(the ``budget`` first, in submission order; a run without a completed high score adds
nothing), its turns from the events written up to the last run's submission.

A repeat's ``proposer`` is its arm's name (``arms.py``): ``tpe@confirm`` runs the orchestrator
with ``AX3L_PROPOSER=tpe`` and ``AX3L_PROMOTION=confirm``, ``tpe`` with ``AX3L_PROMOTION=single``.
Before its databases are dropped, a tuned repeat's promotions are read from them
(``promotions.py``: promotions, runs spent on confirmations, and whether each promotion raised
the surrogate's expected score).

The control arm ``default`` (``CONTROL``) starts no toolbroker and no orchestrator: its one run
is the seeding run's, the default configuration on the repeat's seed, and its recommendation
is that configuration, never tuned. After the budget every repeat's recommendations are
re-tested on the held-out seeds (``retest.py``) while its SnakeLab still runs.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

from ax3l.compare import processes
from ax3l.compare.arms import Arm, parse_arm
from ax3l.compare.processes import Launcher, Service
from ax3l.compare.promotions import PromotionFigures, read_promotion_figures
from ax3l.compare.recommend import GOLDEN, MODEL, model_recommendations, read_run_rows
from ax3l.compare.retest import (
    Golden,
    PointRetest,
    Recommendation,
    RunSource,
    SnakeLabRuns,
    recommendations,
    retest,
    snakelab_runs,
)
from ax3l.compare.settings import CompareSettings
from ax3l.compare.throwaway import RepeatDatabases, repeat_databases
from ax3l.compare.tpe_advice import ADVICE_SOURCE
from ax3l.compare.turn_counts import COUNTED_EVENTS, TurnCounts, TurnEvent, count_turns, entry_kinds
from ax3l.shared.comparison_stats import CONTROL, RepeatVerdict, best_so_far
from ax3l.shared.config_schema import BUNDLED_SCHEMA, ConfigSchema
from ax3l.shared.db.event_reads import first_event_id, select_on, turn_rows
from ax3l.shared.db.snakelab_reads import first_runs, run_count
from ax3l.shared.event_models import GoldenConfigCreated

TERMINAL = ("completed", "failed", "cancelled")
POLL_SECONDS = 0.05
RETEST_POLL_SECONDS = 0.01
# The SnakeLab runs of a repeat's databases and hosts (``retest.snakelab_runs`` on them).
OpenRuns = Callable[[], AbstractAsyncContextManager[SnakeLabRuns]]


class RepeatStopped(RuntimeError):
    """The comparison was interrupted."""


@dataclass(frozen=True)
class RepeatPlan:
    proposer: str  # the arm's name: a proposer, or ``proposer@confirm`` (``arms.py``)
    index: int
    seed: int
    budget: int
    retest_seeds: tuple[int, ...] = ()  # the held-out seeds (none: no re-test)
    retest_at: tuple[int, ...] = ()  # the run counts whose recommendation is re-tested
    recommend: str = GOLDEN  # what is re-tested: the golden, or the model's pick (recommend.py)

    @property
    def arm(self) -> Arm:
        """The orchestrator's proposer and promotion policy."""
        return parse_arm(self.proposer)


@dataclass(frozen=True)
class Placement:
    """Where a repeat ran: its host, its Ray node (None locally), and how many database pairs of
    earlier attempts of it were dropped before it started (a Ray task re-run after its node was
    lost)."""

    host: str
    node_id: str | None = None
    dropped_earlier: int = 0


@dataclass
class RepeatResult:
    plan: RepeatPlan
    state: str  # finished | failed
    scores: list[int | None] = field(default_factory=list)  # run 1..budget, None: no score
    turns: TurnCounts = field(default_factory=TurnCounts)
    wall_seconds: float = 0.0
    setup_seconds: float = 0.0
    retest_seconds: float = 0.0
    retest_hosts: dict[str, int] = field(default_factory=dict)  # SnakeLab host -> re-test runs
    retests: list[PointRetest] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)  # run 1..budget
    goldens: list[Golden] = field(default_factory=list)
    promotions: PromotionFigures | None = None  # tuned repeats only
    error: str | None = None
    placement: Placement | None = None
    # --recommend model: the first ``budget`` runs with their configurations (not stored), and
    # what the golden would have handed over instead (its recommendations, not re-tested).
    run_rows: list[dict[str, Any]] = field(default_factory=list, repr=False)
    golden_picks: list[Recommendation] = field(default_factory=list)

    @property
    def golden_expected_score(self) -> float | None:
        """Under --recommend model, the surrogate's expected score of the final golden."""
        final = [p for p in self.golden_picks if p.at_runs == self.plan.budget]
        return final[0].expected_score if final else None

    @property
    def curve(self) -> list[int | None]:
        return best_so_far(self.scores)

    @property
    def best(self) -> int | None:
        curve = self.curve
        return curve[-1] if curve else None

    def verdict(self) -> RepeatVerdict:
        """Its final recommendation's held-out scores (none without re-tests) and its best."""
        final = [p for p in self.retests if p.recommendation.at_runs == self.plan.budget]
        return RepeatVerdict(
            self.plan.index,
            final[0].scores if final else [],
            None if self.best is None else float(self.best),
            final[0].recommendation.expected_score if final else None,
        )

    def content(self) -> dict[str, Any]:
        """What the row's ``content`` column keeps beyond its own columns."""
        found: dict[str, Any] = {
            "scores": self.scores,
            **self.turns.content(),
            "setup_seconds": round(self.setup_seconds, 3),
        }
        if self.promotions is not None:
            found["promotion"] = self.promotions.content()
        if self.plan.retest_seeds:
            found["retest_seconds"] = round(self.retest_seconds, 3)
            if self.retest_hosts:
                found["retest_hosts"] = self.retest_hosts
            found["recommendations"] = [asdict(p.recommendation) for p in self.retests]
            if self.golden_picks:
                found["golden_recommendations"] = [asdict(p) for p in self.golden_picks]
        if self.placement is not None:
            found["placement"] = asdict(self.placement)
        if self.error:
            found["error"] = self.error
        return found


def write_schema(settings: CompareSettings, seed: int, path: Path) -> ConfigSchema:
    """The schema the services use (``AX3L_SCHEMA_PATH`` or the bundled copy) with the seed's
    default replaced, written to ``path``: seeding then runs the default configuration on the
    repeat's seed."""
    if settings.schema_path is not None:
        text = Path(settings.schema_path).read_text("utf-8")
    else:
        text = resources.files("ax3l.shared.schema").joinpath(BUNDLED_SCHEMA).read_text("utf-8")
    document = dict(json.loads(text))
    document["properties"]["seed"]["default"] = seed
    path.write_text(json.dumps(document))
    return ConfigSchema(document, str(path))


def _last_step_settled(cur: Any, snakelab_db: str, budget: int) -> bool:
    """Whether the orchestrator is done with the step of the budget's last run: it submitted a
    further run (a confirmation, a retry, the next step's), or it wrote a round-robin
    checkpoint after that run's first event (it went on to the next step)."""
    if run_count(cur, snakelab_db) > budget:
        return True
    runs = first_runs(cur, snakelab_db, budget)
    if len(runs) < budget:
        return False
    first = first_event_id(cur, runs[-1][0])
    return first is not None and bool(
        select_on(cur, "round_robin_checkpoint", after=first, oldest=1)
    )


def read_turns(cur: Any, last_run_id: str | None, schema: ConfigSchema) -> TurnCounts:
    """The repeat's turns (``turn_counts``) from its events up to the last run's submission."""
    cutoff = None if last_run_id is None else first_event_id(cur, last_run_id)
    events = [
        TurnEvent(name, parameter, source, text if name == "prompt_sent" else _json(text), *ids)
        for name, parameter, source, text, *ids in turn_rows(
            cur, COUNTED_EVENTS, ADVICE_SOURCE, cutoff
        )
    ]
    return count_turns(events, entry_kinds(schema))


def _json(text: Any) -> Any:
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


def run_repeat(
    plan: RepeatPlan,
    settings: CompareSettings,
    environ: dict[str, str],
    folder: Path,
    *,
    url: str | None,
    surrogate_seconds: float,
    timeout: float,
    stop: threading.Event,
    launcher: Launcher = processes.launch,
    databases: str | None = None,
    placement: Placement | None = None,
    hosts: int = 1,
) -> RepeatResult:
    """Run one repeat to its budget; a failure is returned as a failed result, not raised.

    With ``databases`` (``throwaway.pair_prefix``) its database pair is named with it, and
    pairs of earlier attempts named so are dropped first (counted in the result's
    ``placement``); without, it is ``cmp<hex>``. ``hosts`` reference SnakeLab processes share
    its ``snakelab`` database (``AX3L_SNAKELAB_ENDPOINTS``): runs submitted together (its
    re-tests, a confirmation's, a rotation's baseline) train side by side."""
    began = time.monotonic()
    result = RepeatResult(plan, "failed", placement=placement)
    job = _Job(
        plan, settings, environ, folder, url, surrogate_seconds, timeout, stop, launcher, hosts
    )
    folder.mkdir(parents=True, exist_ok=True)
    services: list[Service] = []
    try:
        with repeat_databases(
            settings, databases or "cmp", drop_earlier=databases is not None
        ) as dbs:
            if placement is not None:
                result.placement = replace(placement, dropped_earlier=dbs.dropped_earlier)
            try:
                _run(job, dbs, services, result, began)
            finally:
                for service in reversed(services):
                    service.stop(processes.STOP_TIMEOUT)
    except Exception as exc:
        result.state = "failed"
        result.error = f"{type(exc).__name__}: {exc}"
    if result.wall_seconds == 0.0:
        result.wall_seconds = time.monotonic() - began
    return result


@dataclass(frozen=True)
class _Job:
    """What one repeat runs with (``run_repeat``'s arguments)."""

    plan: RepeatPlan
    settings: CompareSettings
    environ: dict[str, str]
    folder: Path
    url: str | None
    surrogate_seconds: float
    timeout: float
    stop: threading.Event
    launcher: Launcher
    hosts: int


def _run(
    job: _Job,
    dbs: RepeatDatabases,
    services: list[Service],
    result: RepeatResult,
    began: float,
) -> None:
    schema = job.folder / "schema.json"
    config_schema = write_schema(job.settings, job.plan.seed, schema)
    base = processes.base_env(job.environ)
    endpoints = []
    for host in range(job.hosts):
        own = {"SNAKELAB_HOST_ID": f"h{host}"} if job.hosts > 1 else {}
        snakelab, endpoint = processes.start_snakelab(
            {**base, **dbs.snakelab_env(), **own},
            job.folder / (f"h{host}" if host else ""),
            job.surrogate_seconds,
            schema,
            launcher=job.launcher,
        )
        services.append(snakelab)
        endpoints.append(endpoint)
    open_runs = partial(snakelab_runs, dbs.settings, config_schema, endpoints, RETEST_POLL_SECONDS)
    if job.plan.proposer == CONTROL:
        result.setup_seconds = time.monotonic() - began
        asyncio.run(_control(job, open_runs, config_schema.default_config(), result))
    else:
        _tune(job, dbs, services, result, began, endpoints, schema, config_schema)
        if job.plan.retest_seeds:
            ended = time.monotonic()
            asyncio.run(_retests(job, open_runs, result, config_schema))
            result.retest_seconds = time.monotonic() - ended
    result.state = "finished"


def _tune(
    job: _Job,
    dbs: RepeatDatabases,
    services: list[Service],
    result: RepeatResult,
    began: float,
    endpoints: list[str],
    schema: Path,
    config_schema: ConfigSchema,
) -> None:
    """The proposer's experiment to its budget, its runs, turns and goldens."""
    base = processes.base_env(job.environ)
    ax3l_env = {
        **base,
        **processes.ax3l_passthrough(job.environ),
        **dbs.ax3l_env(),
        "AX3L_SNAKELAB_ENDPOINT": endpoints[0],
        **({"AX3L_SNAKELAB_ENDPOINTS": ",".join(endpoints)} if len(endpoints) > 1 else {}),
        "AX3L_SCHEMA_PATH": str(schema),
        "AX3L_HTTP_HOST": "127.0.0.1",
    }
    if job.url:
        ax3l_env["AX3L_LLM_URL"] = job.url
    broker, zmq_endpoint = processes.start_toolbroker_on_free_ports(
        ax3l_env, job.folder, job.launcher
    )
    services.append(broker)
    ax3l_env["AX3L_ZMQ_ENDPOINT"] = zmq_endpoint
    arm = job.plan.arm
    started = time.monotonic()  # the orchestrator seeds as soon as it runs
    orchestrator = processes.start_orchestrator(
        ax3l_env,
        job.folder,
        arm.proposer,
        job.launcher,
        promotion=arm.promotion,
        golden=arm.golden,
        seed=job.plan.seed,
    )
    services.append(orchestrator)
    result.setup_seconds = started - began
    deadline = started + job.timeout
    conn = dbs.connect()
    try:
        with conn.cursor() as cur:
            while run_count(cur, dbs.snakelab_db) < job.plan.budget:
                _check(job, orchestrator, services, deadline)
                time.sleep(POLL_SECONDS)
            # The budget is spent. The step of its last run is finished (compared, promoted or
            # retained) before the orchestrator stops, so the final recommendation never
            # depends on how fast it was stopped; a run of the step after it is cancelled
            # before the re-tests.
            while not _last_step_settled(cur, dbs.snakelab_db, job.plan.budget):
                _check(job, orchestrator, services, deadline)
                time.sleep(POLL_SECONDS)
            orchestrator.stop(processes.STOP_TIMEOUT)
            while True:
                runs = first_runs(cur, dbs.snakelab_db, job.plan.budget)
                if all(status in TERMINAL for _, status, _ in runs):
                    break
                _check(job, None, services[:-1], deadline)
                time.sleep(POLL_SECONDS)
            result.wall_seconds = time.monotonic() - started
            result.scores = [score if status == "completed" else None for _, status, score in runs]
            result.turns = read_turns(cur, runs[-1][0] if runs else None, config_schema)
            result.run_ids = [run_id for run_id, _, _ in runs]
            result.goldens = read_goldens(cur)
            result.promotions = read_promotion_figures(
                cur, arm.promotion, result.goldens, result.run_ids, surrogate=True
            )
            if job.plan.recommend == MODEL:
                result.run_rows = read_run_rows(
                    cur, dbs.snakelab_db, config_schema, job.plan.budget
                )
    finally:
        conn.close()


def read_goldens(cur: Any) -> list[Golden]:
    """The repeat's ``golden_config_created`` events in order (their run, configuration, kind
    and SnakeLab's run count when each was written)."""
    found = []
    for event in select_on(cur, GoldenConfigCreated):
        content = event.content
        if isinstance(content, dict) and isinstance(content.get("config"), dict):
            kind, simulations = content.get("kind"), content.get("simulations")
            found.append(
                Golden(
                    str(content["run_id"]),
                    content["config"],
                    kind if isinstance(kind, str) else None,
                    int(simulations) if isinstance(simulations, int | float) else None,
                )
            )
    return found


async def _control(
    job: _Job, open_runs: OpenRuns, config: dict[str, Any], result: RepeatResult
) -> None:
    """The control arm: the seeding run's default configuration, once, then its re-tests."""
    started = time.monotonic()
    async with open_runs() as runs:
        run_id = await runs.reuse_or_submit(config)
        state, score = await _ended(runs, run_id, job)
        result.wall_seconds = time.monotonic() - started
        result.scores = [score if state == "completed" else None]
        result.run_ids = [run_id]
        result.goldens = [Golden(run_id, config)]
        if job.plan.retest_seeds:
            ended = time.monotonic()
            await _retest_with(runs, job, result)
            result.retest_seconds = time.monotonic() - ended


async def _retests(
    job: _Job, open_runs: OpenRuns, result: RepeatResult, schema: ConfigSchema
) -> None:
    async with open_runs() as runs:
        await runs.cancel_beyond(job.plan.budget)
        await _retest_with(runs, job, result, schema)


async def _retest_with(
    runs: SnakeLabRuns, job: _Job, result: RepeatResult, schema: ConfigSchema | None = None
) -> None:
    picks = recommendations(result.goldens, result.run_ids, job.plan.retest_at, surrogate=True)
    if schema is not None and result.run_rows:
        result.golden_picks = picks
        picks = model_recommendations(
            result.run_rows,
            schema,
            picks,
            lower_bound=job.settings.model_lower_bound,
            surrogate=True,
        )
    deadline = time.monotonic() + job.timeout
    result.retests = await retest(
        runs,
        picks,
        job.plan.retest_seeds,
        interval=RETEST_POLL_SECONDS,
        check=lambda: _still_wanted(job, deadline),
    )
    if job.hosts > 1:
        ran = [
            run_id
            for point in result.retests
            for seed in point.seeds
            for run_id in (*seed.failed_run_ids, *([seed.run_id] if seed.run_id else []))
        ]
        result.retest_hosts = await runs.hosts_of(sorted(set(ran)))


async def _ended(runs: RunSource, run_id: str, job: _Job) -> tuple[str, int | None]:
    deadline = time.monotonic() + job.timeout
    while (ended := await runs.ended(run_id)) is None:
        _still_wanted(job, deadline)
        await asyncio.sleep(RETEST_POLL_SECONDS)
    return ended


def _still_wanted(job: _Job, deadline: float) -> None:
    if job.stop.is_set():
        raise RepeatStopped("the comparison was interrupted")
    if time.monotonic() > deadline:
        raise TimeoutError(f"a run did not end within {job.timeout:g} s")


def _check(
    job: _Job, orchestrator: Service | None, services: list[Service], deadline: float
) -> None:
    if job.stop.is_set():
        raise RepeatStopped("the comparison was interrupted")
    for service in services:
        if (exited := service.exited()) is not None:
            raise service.failure(exited)
    if time.monotonic() > deadline:
        what = orchestrator.log_tail(10) if orchestrator else ""
        raise TimeoutError(f"the budget was not reached within {job.timeout:g} s\n{what}")
