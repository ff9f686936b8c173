"""The comparable history of an entry: stored runs whose other settings equal the golden's.

This is what the prompts show and what the TPE proposer learns from. Only the entry's own
values (and the seed) may differ from the golden configuration; the comparison is exact
(canonical fractions), any run status counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ax3l.shared.canonical import canonical_number
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database
from ax3l.shared.registry import Entry

SEED_COLUMN = "seed"


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
        groups: dict[tuple[Fraction, ...], dict[str, Any]] = {}
        for run in self.runs:
            group = groups.get(run.key)
            if group is None:
                if len(self.entry.paths) == 1:
                    group = {"value": run.values[0]}
                else:
                    group = dict(zip(self.entry.paths, run.values, strict=True))
                group["current_seed"] = []
                group["earlier_seeds"] = []
                groups[run.key] = group
            if run.seed == self.seed:
                group["current_seed"].append(
                    {"run_id": run.run_id, "status": run.status, "high_score": run.high_score}
                )
            else:
                group["earlier_seeds"].append({"seed": run.seed, "high_score": run.high_score})
        return [groups[key] for key in sorted(groups)]


async def load_history(
    db: Database, schema: ConfigSchema, entry: Entry, golden_config: Mapping[str, Any]
) -> ComparableHistory:
    """Read the comparable runs of ``entry`` from SnakeLab's tables."""
    golden_flat = schema.flatten(dict(golden_config))
    own = set(entry.columns)
    others = [c for c in schema.columns if c not in own and c != SEED_COLUMN]
    # Integer settings narrow the scan in SQL exactly; the rest is compared as fractions below.
    narrowing = [c for c in others if schema.by_column[c].type == "integer"]
    where = " AND ".join(f"c.{c} = %s" for c in narrowing) or "1 = 1"
    columns = ", ".join(f"c.{c}" for c in schema.columns)
    rows = await db.fetchall(
        f"SELECT r.run_id, r.status, r.high_score, {columns}"
        f" FROM {db.sl('simulation_runs')} r JOIN {db.sl('configurations')} c"
        f" ON c.run_id = r.run_id WHERE {where} ORDER BY r.id",
        [int(golden_flat[c]) for c in narrowing],
        doing=f"reading the comparable history of {entry.name}",
    )
    wanted = tuple(canonical_number(golden_flat[c]) for c in others)
    runs = []
    for row in rows:
        try:
            if tuple(canonical_number(row[c]) for c in others) != wanted:
                continue
            values = tuple(schema.coerce(schema.by_column[c], row[c]) for c in entry.columns)
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
