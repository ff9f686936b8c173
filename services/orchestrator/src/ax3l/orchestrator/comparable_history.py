"""The comparable history of an entry: stored runs whose other settings equal the golden's.

This is what the prompts show and what the TPE proposer learns from. Only the entry's own
values (and the seed) may differ from the golden configuration; the comparison is exact
(canonical fractions), any run status counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from ax3l.shared.canonical import canonical_number
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.db.snakelab_reads import SnakeLabRuns
from ax3l.shared.registry import Entry

SEED_COLUMN = "seed"
# Summarised, a value lists only its latest current-seed runs (there is normally one: the same
# value is refused twice on one seed) and aggregates the older ones.
CURRENT_RUNS_SHOWN = 3


@dataclass(frozen=True)
class HistoryRun:
    """One comparable run."""

    run_id: str
    status: str
    high_score: int | None
    seed: int
    values: tuple[int | float, ...]  # the entry's values, in the entry's path order

    @property
    def key(self) -> tuple[Fraction, ...]:
        return tuple(canonical_number(v) for v in self.values)


@dataclass(frozen=True)
class ComparableHistory:
    """Every comparable run of one entry, oldest first, and the golden it is relative to."""

    entry: Entry
    seed: int
    golden_values: tuple[int | float, ...]
    runs: tuple[HistoryRun, ...]

    def current_seed(self) -> list[HistoryRun]:
        return [run for run in self.runs if run.seed == self.seed]

    def tested_keys(self) -> set[tuple[Fraction, ...]]:
        """Values already run on the current seed (any status): proposing them is a duplicate."""
        return {run.key for run in self.current_seed()}

    def report(self) -> list[dict[str, Any]]:
        """Per tested value: current-seed results and earlier-seed high scores (prompt JSON)."""
        return self.summary().groups

    @cached_property
    def value_groups(self) -> tuple[ValueGroup, ...]:
        """The runs grouped by tested value, in value order (one pass over the runs)."""
        exact = _ExactNumbers()
        exact_id = exact.id
        seed = self.seed
        # Per value: its first run, current-seed runs, earlier-seed runs, latest positions.
        found: dict[
            tuple[int, ...], tuple[HistoryRun, list[HistoryRun], list[HistoryRun], list[int]]
        ]
        found = {}
        for position, run in enumerate(self.runs):
            ids = tuple(map(exact_id, run.values))
            group = found.get(ids)
            if group is None:
                group = found[ids] = (run, [], [], [position, -1])
            group[3][0] = position
            if run.seed == seed:
                group[1].append(run)
                group[3][1] = position
            else:
                group[2].append(run)
        rank = exact.ranks()
        return tuple(
            ValueGroup(
                key=tuple(exact.numbers[i] for i in ids),
                values=first.values,
                current=tuple(current),
                earlier=tuple(earlier),
                latest=latest[0],
                latest_current=latest[1],
            )
            for ids, (first, current, earlier, latest) in sorted(
                found.items(), key=lambda item: tuple(rank[i] for i in item[0])
            )
        )

    @cached_property
    def priority(self) -> tuple[int, ...]:
        """Indexes into ``value_groups``, the group to keep first when space is short.

        Values run on the current seed come first (they are comparable and refuse duplicates),
        alternating the best-scoring and the most recently run; then values only run on
        earlier seeds, in the same alternation. Ties are broken by value: deterministic.
        """
        groups = self.value_groups
        on_current = [i for i, g in enumerate(groups) if g.current]
        only_earlier = [i for i, g in enumerate(groups) if not g.current]

        def best_current(i: int) -> tuple[int, int]:
            return (-_best(groups[i].current, -1), -groups[i].latest_current)

        def best_earlier(i: int) -> tuple[int, int]:
            return (-_best(groups[i].earlier, -1), -groups[i].latest)

        order = _alternate(
            sorted(on_current, key=best_current),
            sorted(on_current, key=lambda i: -groups[i].latest_current),
        ) + _alternate(
            sorted(only_earlier, key=best_earlier),
            sorted(only_earlier, key=lambda i: -groups[i].latest),
        )
        return tuple(order)

    @cached_property
    def _omitted_after(self) -> tuple[tuple[int, int, int], ...]:
        """For each ``k``: runs, current-seed values and best score of ``priority[k:]``."""
        groups = self.value_groups
        totals = [(0, 0, -1)]
        for i in reversed(self.priority):
            runs, current, best = totals[-1]
            group = groups[i]
            totals.append(
                (
                    runs + len(group.current) + len(group.earlier),
                    current + (1 if group.current else 0),
                    max(best, _best(group.current, -1), _best(group.earlier, -1)),
                )
            )
        return tuple(reversed(totals))

    def summary(self, summarised: bool = False, keep: int | None = None) -> HistorySummary:
        """What a prompt shows: every value, or the ``keep`` first in ``priority`` (shown in
        value order). ``summarised``: earlier seeds aggregated per value, and of a value's
        current-seed runs only the latest ``CURRENT_RUNS_SHOWN`` listed (status and score, no
        run id), the older aggregated."""
        groups = self.value_groups
        keep = len(groups) if keep is None else min(max(keep, 0), len(groups))
        kept = range(len(groups)) if keep == len(groups) else sorted(self.priority[:keep])
        runs, current, best = self._omitted_after[keep]
        return HistorySummary(
            groups=[groups[i].as_json(self.entry, summarised) for i in kept],
            summarised=summarised,
            omitted_values=len(groups) - keep,
            omitted_runs=runs,
            omitted_current_seed_values=current,
            omitted_best_high_score=None if best < 0 else best,
        )

    def size_floor(self, summarised: bool) -> int:
        """How many groups and listed runs a full (``keep=None``) summary shows."""
        groups = self.value_groups
        if not summarised:
            return len(groups) + len(self.runs)
        return sum(1 + min(len(g.current), CURRENT_RUNS_SHOWN + 1) for g in groups)


@dataclass(frozen=True)
class ValueGroup:
    """The runs of one tested value (or pair of values), each list oldest first."""

    key: tuple[Fraction, ...]
    values: tuple[int | float, ...]
    current: tuple[HistoryRun, ...]
    earlier: tuple[HistoryRun, ...]
    latest: int  # position in the history of the group's latest run (recency)
    latest_current: int  # the same for the current seed, -1 without one

    def as_json(self, entry: Entry, summarised: bool) -> dict[str, Any]:
        if len(entry.paths) == 1:
            group: dict[str, Any] = {"value": self.values[0]}
        else:
            group = dict(zip(entry.paths, self.values, strict=True))
        listed = self.current[-CURRENT_RUNS_SHOWN:] if summarised else self.current
        # Summarised, a run is its status and score: a run id tells the model nothing and
        # costs as many tokens as the rest of the run.
        group["current_seed"] = [
            {"status": run.status, "high_score": run.high_score}
            if summarised
            else {"run_id": run.run_id, "status": run.status, "high_score": run.high_score}
            for run in listed
        ]
        if len(listed) < len(self.current):
            group["current_seed_older"] = runs_aggregate(self.current[: -len(listed)])
        if summarised:
            group["earlier_seeds"] = runs_aggregate(self.earlier)
        else:
            group["earlier_seeds"] = [
                {"seed": run.seed, "high_score": run.high_score} for run in self.earlier
            ]
        return group


def runs_aggregate(runs: tuple[HistoryRun, ...]) -> dict[str, Any]:
    """Runs as ``{runs, best, mean}`` (best and mean high score over the scored ones)."""
    scores = [run.high_score for run in runs if run.high_score is not None]
    return {
        "runs": len(runs),
        "best": max(scores) if scores else None,
        "mean": round(sum(scores) / len(scores), 1) if scores else None,
    }


@dataclass(frozen=True)
class HistorySummary:
    """The part of a history a prompt shows, and an account of what it leaves out."""

    groups: list[dict[str, Any]]  # JSON-ready, in value order
    summarised: bool
    omitted_values: int
    omitted_runs: int
    omitted_current_seed_values: int
    omitted_best_high_score: int | None


def _best(runs: tuple[HistoryRun, ...], default: int) -> int:
    return max((run.high_score for run in runs if run.high_score is not None), default=default)


def _alternate(first: list[int], second: list[int]) -> list[int]:
    """``first[0], second[0], first[1], ...`` without repeats (both hold the same items)."""
    seen: set[int] = set()
    order: list[int] = []
    for pair in zip(first, second, strict=True):
        for item in pair:
            if item not in seen:
                seen.add(item)
                order.append(item)
    return order


# A value's first run, current-seed runs, earlier-seed runs and [latest, latest current] position.
_Found = tuple[HistoryRun, list[HistoryRun], list[HistoryRun], list[int]]


class _ExactNumbers:
    """Small integer ids of exact values: equal numbers, however written, get the same id.

    Hashing fractions is slow; a history repeats few distinct numbers, so each is made exact
    once and the runs are grouped by tuples of ids.
    """

    def __init__(self) -> None:
        self._by_raw: dict[tuple[type, Any], int] = {}
        self._by_number: dict[Fraction, int] = {}
        self.numbers: list[Fraction] = []

    def id(self, value: Any) -> int:
        # Keyed by type too: True == 1 but a boolean is no number.
        raw = (type(value), value)
        found = self._by_raw.get(raw)
        if found is None:
            number = canonical_number(value)
            found = self._by_number.setdefault(number, len(self.numbers))
            if found == len(self.numbers):
                self.numbers.append(number)
            self._by_raw[raw] = found
        return found

    def ranks(self) -> list[int]:
        """Each id's position in the numbers' order."""
        rank = [0] * len(self.numbers)
        for position, i in enumerate(
            sorted(range(len(self.numbers)), key=self.numbers.__getitem__)
        ):
            rank[i] = position
        return rank


async def load_history(
    db: Database, schema: ConfigSchema, entry: Entry, golden_config: Mapping[str, Any]
) -> ComparableHistory:
    """Read the comparable runs of ``entry`` from SnakeLab's tables."""
    golden_flat = schema.flatten(dict(golden_config))
    own = set(entry.columns)
    others = [c for c in schema.columns if c not in own and c != SEED_COLUMN]
    # Every other setting is compared in SQL, exactly (``SnakeLabRuns.matching``). Two floats
    # are equal exactly when their shortest decimals are, so this is the canonical equality of
    # ``canonical_number``, and only comparable rows (with the few columns the history needs)
    # leave the server.
    equal = {c: schema.coerce(schema.by_column[c], golden_flat[c]) for c in others}
    rows = await SnakeLabRuns(db).matching(
        equal,
        [SEED_COLUMN, *entry.columns],
        doing=f"reading the comparable history of {entry.name}",
    )
    leaves = [schema.by_column[c] for c in entry.columns]
    runs = []
    for row in rows:
        try:
            values = tuple(schema.coerce(leaf, row[leaf.column]) for leaf in leaves)
        except (TypeError, ValueError):
            continue  # a row that is not numbers cannot be comparable
        runs.append(
            HistoryRun(
                run_id=str(row["run_id"]),
                status=str(row["status"]),
                high_score=None if row["high_score"] is None else int(row["high_score"]),
                seed=int(row[SEED_COLUMN]),
                values=values,
            )
        )
    golden_values = tuple(golden_flat[c] for c in entry.columns)
    return ComparableHistory(entry, int(golden_flat[SEED_COLUMN]), golden_values, tuple(runs))
