"""Held-out re-tests: a repeat's recommendation run on seeds that no repeat tunes on.

A repeat's **recommendation** after ``b`` SnakeLab runs is the golden configuration a user would
have been handed then: the latest ``golden_config_created`` whose run is among runs ``1..b``
and that was written while SnakeLab held at most ``b`` runs (its ``simulations``: a confirmed
golden was decided on confirmation runs after its own) (the ``default`` arm's is the default
configuration, never tuned). It is re-tested on repeat ``i``'s
**held-out seeds** ``--seed + HELD_OUT_OFFSET + i * R + j`` (``j < R = --retest``): the same
for every arm in a repeat, so the paired differences compare like with like, and another draw
in every repeat, so that the control arm's held-out score (one configuration) is not one fixed
draw of luck that every paired difference shares: over the repeats that luck averages out and
the intervals carry it. They are disjoint from every seed a repeat tunes on, which are
``--seed + i`` for repeat ``i`` plus at most one increment per run by the seed rotation
(``check_disjoint``). When an arm runs under ``AX3L_PROMOTION=confirm`` or ``race``
(``arms.py``), its orchestrator also runs configurations on the trial seeds
``s + 1,000,000 + k`` (k = 1..``AX3L_CONFIRM_SEEDS`` or ``AX3L_RACE_MAX_SEEDS``) of every seed
``s`` it tunes on, which would overlap ``--seed + 1,000,000 + ...``: such a comparison re-tests
from ``--seed + CONFIRM_HELD_OUT_OFFSET`` instead, above every trial seed any repeat can reach.

The re-test runs go through the repeat's own SnakeLab and databases, after its budget is spent
(they are not counted in it), and exactly once (``SnakeLabRuns``, on
``ax3l.shared.submit_once`` like the loop's own runs: a stored usable run of the configuration
is reused, a lost answer is looked up, nothing is resent blindly). A re-test run that fails, is
cancelled (a SnakeLab killed mid-run records its run as failed) or completes without a high
score is run again, up to ``RETEST_ATTEMPTS`` times; its failed run ids are kept with the seed's
row. Each seed counts exactly one completed run: never dropped, never twice. When a seed has no
score after ``RETEST_ATTEMPTS`` runs the repeat fails (``RetestFailed``).

On the surrogate trainer, each recommendation also gets its noise-free expected high score
(``snakelab.trainers.surrogate.expected_high_score``, averaged over seeds): the ground truth a
real SnakeLab never has.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import zmq.asyncio

from ax3l.compare.settings import CompareSettings
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db import snakelab_reads
from ax3l.shared.db.config_index import ConfigIndex
from ax3l.shared.db.database import Database
from ax3l.shared.snakelab_client import SnakeLabClient, SnakeLabError
from ax3l.shared.snakelab_hosts import snakelab_client
from ax3l.shared.submit_once import OnceSubmitter
from ax3l.shared.wire import TERMINAL_STATES
from snakelab.trainers.surrogate import expected_high_score

HELD_OUT_OFFSET = 1_000_000
# The orchestrator's confirmation seeds of a seed s are s + CONFIRMATION_OFFSET + k, k = 1..R
# (ax3l.orchestrator.racing.confirmation_seeds; a test checks this copy against it).
CONFIRMATION_OFFSET = 1_000_000
# Held-out seeds of a comparison with a confirm arm: above every confirmation seed.
CONFIRM_HELD_OUT_OFFSET = 2_000_000
RETEST_ATTEMPTS = 3


class RetestFailed(RuntimeError):
    """A held-out seed got no score in ``RETEST_ATTEMPTS`` runs."""


def held_out_seeds(
    base_seed: int, count: int, confirm_seeds: int = 0, repeat: int = 0
) -> list[int]:
    """Repeat ``repeat``'s re-test seeds in a comparison whose repeat 0 tunes on ``base_seed``;
    with ``confirm_seeds`` (an arm under confirm or race: its most trial seeds) above the trial
    seeds."""
    offset = CONFIRM_HELD_OUT_OFFSET if confirm_seeds else HELD_OUT_OFFSET
    return [base_seed + offset + repeat * count + j for j in range(count)]


def highest_tuning_seed(base_seed: int, repeats: int, budget: int) -> int:
    """The highest seed any repeat can tune on: the last repeat's seed plus one rotation per
    run of its budget (each rotation increments the seed by one)."""
    return base_seed + repeats - 1 + budget


def confirmation_seeds(seed: int, count: int) -> list[int]:
    """The orchestrator's confirmation seeds of ``seed`` under ``AX3L_CONFIRM_SEEDS=count``."""
    return [seed + CONFIRMATION_OFFSET + k for k in range(1, count + 1)]


def confirmation_seed_range(base_seed: int, repeats: int, budget: int, confirm_seeds: int) -> range:
    """Every confirmation seed a repeat can reach (those of each seed it can tune on)."""
    if not confirm_seeds:
        return range(0)
    low = confirmation_seeds(base_seed, confirm_seeds)[0]
    high = confirmation_seeds(highest_tuning_seed(base_seed, repeats, budget), confirm_seeds)[-1]
    return range(low, high + 1)


def check_disjoint(
    base_seed: int, repeats: int, budget: int, count: int, confirm_seeds: int = 0
) -> None:
    """Raise ``ValueError`` when a held-out seed could be a tuning seed or (with
    ``confirm_seeds``: an arm runs under confirm) a confirmation seed."""
    if not count:
        return
    held_out = [
        held_out_seeds(base_seed, count, confirm_seeds)[0],
        held_out_seeds(base_seed, count, confirm_seeds, repeats - 1)[-1],
    ]
    if highest_tuning_seed(base_seed, repeats, budget) >= held_out[0]:
        raise ValueError(
            f"--repeats + --budget must stay below {HELD_OUT_OFFSET:,}: the held-out seeds start"
            f" at --seed + {HELD_OUT_OFFSET:,}"
        )
    confirming = confirmation_seed_range(base_seed, repeats, budget, confirm_seeds)
    if confirming and confirming[-1] >= held_out[0] and confirming[0] <= held_out[-1]:
        raise ValueError(
            f"--repeats + --budget + AX3L_CONFIRM_SEEDS must stay below"
            f" {CONFIRM_HELD_OUT_OFFSET - CONFIRMATION_OFFSET:,}: a confirm arm's confirmation"
            f" seeds reach --seed + {CONFIRMATION_OFFSET:,} + that, the held-out seeds start at"
            f" --seed + {CONFIRM_HELD_OUT_OFFSET:,}"
        )


def retest_points(budget: int, at: Sequence[int]) -> list[int]:
    """The run counts whose recommendation is re-tested: ``at`` (within the budget) and the
    budget itself, ascending."""
    return sorted({b for b in at if 1 <= b < budget} | {budget})


@dataclass(frozen=True)
class Golden:
    """A ``golden_config_created`` of a repeat: its run and configuration; its ``kind``
    (``seeding``, ``promotion``, ``seed_rotation``) and ``simulations`` (SnakeLab's run count
    when it was written) when read from the events."""

    run_id: str
    config: dict[str, Any]
    kind: str | None = None
    simulations: int | None = None

    def known_after(self, point: int, position: Mapping[str, int]) -> bool:
        """Whether it was decided on runs ``1..point`` alone (``position``: run id -> k)."""
        within = position.get(self.run_id, point + 1) <= point
        return within and (self.simulations is None or self.simulations <= point)


@dataclass(frozen=True)
class Recommendation:
    """What a repeat recommends after ``at_runs`` runs."""

    at_runs: int
    golden_run_id: (
        str  # the run whose configuration it is (the model's pick under --recommend model)
    )
    config: dict[str, Any]
    expected_score: float | None  # surrogate only
    by: str = "golden"  # golden, or model (--recommend model)


def recommendations(
    goldens: Sequence[Golden], run_ids: Sequence[str], points: Sequence[int], *, surrogate: bool
) -> list[Recommendation]:
    """The recommendation at each point: the latest golden (in event order) whose run is one of
    the first ``point`` runs (``run_ids``, in submission order) and that was written while
    SnakeLab held at most ``point`` runs (``Golden.known_after``: a golden confirmed on later
    runs is not known yet). A point before the first golden has none."""
    position = {run_id: k for k, run_id in enumerate(run_ids, start=1)}
    found = []
    for point in points:
        eligible = [g for g in goldens if g.known_after(point, position)]
        if eligible:
            golden = eligible[-1]
            expected = expected_high_score(golden.config) if surrogate else None
            found.append(Recommendation(point, golden.run_id, golden.config, expected))
    return found


@dataclass
class SeedRetest:
    """One held-out seed of a recommendation: the run that counts and the runs that failed."""

    seed: int
    run_id: str | None = None
    score: int | None = None
    failed_run_ids: list[str] = field(default_factory=list)


@dataclass
class PointRetest:
    """A recommendation and its held-out seeds."""

    recommendation: Recommendation
    seeds: list[SeedRetest]

    @property
    def scores(self) -> list[int]:
        return [s.score for s in self.seeds if s.score is not None]

    @property
    def mean(self) -> float | None:
        scores = self.scores
        return sum(scores) / len(scores) if scores else None


class RunSource(Protocol):
    """Where re-test runs come from (the repeat's SnakeLab through ``OnceSubmitter``)."""

    async def reuse_or_submit(self, config: dict[str, Any]) -> str:
        """A usable stored run of ``config``, or one submitted exactly once."""

    async def ended(self, run_id: str) -> tuple[str, int | None] | None:
        """``(state, high_score)`` once the run is terminal, else None."""


async def retest(
    source: RunSource,
    picks: Sequence[Recommendation],
    seeds: Sequence[int],
    *,
    interval: float = 0.01,
    check: Callable[[], None] = lambda: None,
) -> list[PointRetest]:
    """Every recommendation on every held-out seed; a configuration re-tested at an earlier
    point is not run again (its seeds' results are shared). ``check`` raises to stop waiting
    (the comparison was interrupted, the repeat's time is up)."""
    done: dict[str, list[SeedRetest]] = {}
    found = []
    for pick in picks:
        key = _key(pick.config)
        if key not in done:
            done[key] = await _retest_config(source, pick.config, seeds, interval, check)
        found.append(PointRetest(pick, done[key]))
    return found


def _key(config: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in config.items() if k != "seed"}, sort_keys=True)


async def _retest_config(
    source: RunSource,
    config: dict[str, Any],
    seeds: Sequence[int],
    interval: float,
    check: Callable[[], None],
) -> list[SeedRetest]:
    results = [SeedRetest(seed) for seed in seeds]
    open_seeds = list(results)
    for _attempt in range(RETEST_ATTEMPTS):
        # Submit every seed that still needs a score, then wait for all of them: SnakeLab
        # queues them, and one wait covers the batch.
        running = [
            (seed, await source.reuse_or_submit({**config, "seed": seed.seed}))
            for seed in open_seeds
        ]
        open_seeds = []
        for seed, run_id in running:
            state, score = await _wait(source, run_id, interval, check)
            if state == "completed" and score is not None:
                seed.run_id, seed.score = run_id, score
            else:
                seed.failed_run_ids.append(run_id)
                open_seeds.append(seed)
        if not open_seeds:
            return results
    missing = ", ".join(f"{s.seed} (runs {', '.join(s.failed_run_ids)})" for s in open_seeds)
    raise RetestFailed(f"held-out seed(s) without a score after {RETEST_ATTEMPTS} runs: {missing}")


async def _wait(
    source: RunSource, run_id: str, interval: float, check: Callable[[], None]
) -> tuple[str, int | None]:
    while (ended := await source.ended(run_id)) is None:
        check()
        await asyncio.sleep(interval)
    return ended


@dataclass(eq=False)
class SnakeLabRuns:
    """The repeat's SnakeLab as a ``RunSource``, through ``ax3l.shared.submit_once``'s
    ``OnceSubmitter`` as the loop's own runs are: a stored usable run of the configuration is
    reused; otherwise it is sent once, and after a lost answer the run it created is looked up
    once SnakeLab answers again, never resent."""

    db: Database
    client: SnakeLabClient
    index: ConfigIndex
    interval: float

    async def reuse_or_submit(self, config: dict[str, Any]) -> str:
        once = OnceSubmitter(self.db, self.client, self.index, self.interval)
        run_id, _ = await once.reuse_or_submit(config, "re-test")
        return run_id

    async def ended(self, run_id: str) -> tuple[str, int | None] | None:
        ended = await snakelab_reads.SnakeLabRuns(self.db).status(run_id)
        return ended if ended is not None and ended[0] in TERMINAL_STATES else None

    async def hosts_of(self, run_ids: Sequence[str]) -> dict[str, int]:
        """How many of ``run_ids`` each SnakeLab host ran (``simulation_runs.host``)."""
        return await snakelab_reads.SnakeLabRuns(self.db).hosts(run_ids)

    async def cancel_beyond(self, budget: int) -> list[str]:
        """Cancel the runs after the first ``budget`` that are not terminal (the orchestrator's
        next step, begun before it was stopped), so that re-tests do not queue behind them.
        A run that ended meanwhile is left as it is. Returns the runs cancelled."""
        cancelled = []
        for run_id, status in await snakelab_reads.SnakeLabRuns(self.db).in_order(budget, 1000):
            if status in TERMINAL_STATES:
                continue
            try:
                await self.client.cancel(run_id)
            except SnakeLabError:  # it ended between the read and the cancel
                continue
            cancelled.append(run_id)
        return cancelled


@contextlib.asynccontextmanager
async def snakelab_runs(
    settings: CompareSettings, schema: ConfigSchema, endpoints: list[str], interval: float
) -> AsyncIterator[SnakeLabRuns]:
    """A ``SnakeLabRuns`` on a repeat's databases (``settings``) and SnakeLab hosts
    (``endpoints``: with several, runs submitted together go to idle hosts), with a ZeroMQ
    context of its own (each repeat runs in a thread of its own)."""
    context = zmq.asyncio.Context()
    db = await Database(settings).open()
    try:
        client = snakelab_client(endpoints, settings.snakelab_timeout, context)
        yield SnakeLabRuns(db, client, ConfigIndex(db, schema), interval)
    finally:
        await db.close()
        context.term()
