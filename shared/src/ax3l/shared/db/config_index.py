"""Ax3l's own index over SnakeLab's runs: duplicate and exhaustion checks by index lookup.

The spec compares a candidate with every stored run over all 26 columns (any status, any
project version, seed included). Done in SnakeLab's tables that is a full scan, and Ax3l may
only SELECT there, so Ax3l keeps this index in its own database:

* ``config_index_runs``: per SnakeLab run a 64-bit key, the first bytes of the SHA-256 of
  its canonical column text (``canonical.fingerprint``'s text: ``0.1`` and ``0.10`` give the
  same text, ``0.1`` and ``0.1000001`` do not).
* ``config_index_contexts``: per run and registry entry, the key of every column *except* the
  entry's (its "context"). The runs whose other settings equal the golden's are one index
  range: ``(entry, key of the golden's context)``.

A key only narrows the search to a handful of SnakeLab rows. Those rows are read by primary
key and compared column by column in canonical form, so the answers are exactly the spec's
comparison (a key collision costs a row read, never a wrong answer), they reflect SnakeLab's
current rows (a deleted run stops counting), and the index stays small.

The index is brought up to date incrementally by SnakeLab's auto-increment ``id``. Ids become
visible in commit order, not allocation order: a writer holding id 10 may commit after the
writer of id 11. Ids skipped that way are remembered as *holes* and probed again on every
refresh until their run appears or ``HOLE_GRACE`` has passed (rolled-back inserts leave holes
forever). If the run at the last indexed id changes or vanishes, SnakeLab's database was
recreated and the index is rebuilt from scratch; likewise when the schema's columns change.
Concurrent refreshes (broker and orchestrator) are serialised by a row lock on the state row.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

from ax3l.shared import registry
from ax3l.shared.canonical import number_text
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db.database import Database

logger = logging.getLogger(__name__)

STATE_NAME = "snakelab"
# No SnakeLab transaction stays open this long between inserting a run and committing it.
HOLE_GRACE = timedelta(minutes=15)
# Beyond this many open hole ranges the oldest are dropped (only auto_increment_increment > 1
# setups get near it); a warning is logged.
MAX_HOLES = 10_000
DEFAULT_BATCH = 2_000
KEY_BITS = 64


@dataclass(frozen=True)
class IndexedRun:
    """A stored run found by the index: SnakeLab's row id, the run's id and its status."""

    sl_id: int
    run_id: str
    status: str | None = None


def _digest(texts: Mapping[str, str], names: Iterable[str]) -> bytes:
    # The same text canonical.fingerprint hashes: "column=value;column=value..."
    text = ";".join(f"{name}={texts[name]}" for name in names)
    return hashlib.sha256(text.encode("ascii")).digest()


def _key(texts: Mapping[str, str], names: Iterable[str]) -> int:
    """The index key: the first 64 bits of the SHA-256 of the canonical text."""
    return int.from_bytes(_digest(texts, names)[: KEY_BITS // 8], "big")


class ConfigIndex:
    """Duplicate and exhaustion lookups over every run SnakeLab has stored."""

    def __init__(self, db: Database, schema: ConfigSchema, batch_size: int = DEFAULT_BATCH):
        self.db = db
        self.schema = schema
        self.batch_size = batch_size
        self._columns = schema.columns
        self._contexts = {
            item.name: tuple(c for c in self._columns if c not in item.columns)
            for item in registry.ENTRIES
        }
        # The stored layout depends on the columns and on the registry (entry numbers and
        # their columns): a change of either rebuilds the index.
        layout = (
            ",".join(self._columns)
            + "|"
            + ";".join(f"{item.name}:{'+'.join(item.columns)}" for item in registry.ENTRIES)
        )
        self._columns_hash = hashlib.sha256(layout.encode("ascii")).hexdigest()
        self._entry_ids = {item.name: number for number, item in enumerate(registry.ENTRIES)}
        self._select_columns = ", ".join(f"c.{column}" for column in self._columns)
        self._number_texts: dict[Any, str] = {}
        self._state_ready = False

    # -- fingerprints -------------------------------------------------------------------------

    def _texts(self, config_or_flat: Mapping[str, Any]) -> dict[str, str]:
        if all(column in config_or_flat for column in self._columns):
            return {column: self._number_text(config_or_flat[column]) for column in self._columns}
        texts = {}
        for leaf in self.schema.leaves:
            # No coercion: a boolean or a string must not pass for a number here.
            texts[leaf.column] = self._number_text(self.schema.get(config_or_flat, leaf.path))
        return texts

    def _number_text(self, value: Any) -> str:
        # Runs repeat the same few values, and number_text (an exact fraction) is the slow
        # part of indexing; equal numbers share one text, so a plain dict cache is safe.
        if isinstance(value, bool):
            return number_text(value)  # raises: booleans are not numbers
        try:
            return self._number_texts[value]
        except KeyError:
            text = number_text(value)
            if len(self._number_texts) > 100_000:
                self._number_texts.clear()
            self._number_texts[value] = text
            return text

    def fingerprint(self, config: Mapping[str, Any]) -> str:
        """The canonical fingerprint of all 26 columns (same as ``canonical.fingerprint``)."""
        return _digest(self._texts(config), self._columns).hex()

    def context_fingerprint(self, item: registry.Entry, config: Mapping[str, Any]) -> str:
        """The fingerprint of every column except ``item``'s."""
        return _digest(self._texts(config), self._contexts[item.name]).hex()

    # -- refresh ------------------------------------------------------------------------------

    async def refresh(self) -> int:
        """Index the runs SnakeLab stored since the last refresh; returns how many were new."""
        if await self._up_to_date():
            return 0
        total = 0
        while True:
            added, more = await self._refresh_batch()
            total += added
            if not more:
                return total

    async def _up_to_date(self) -> bool:
        # One lock-free read answers the common case (nothing new): the highest SnakeLab id
        # is the last indexed one, that run is still the same, and no gap awaits a late
        # commit (every gap below last_id was recorded when last_id moved past it).
        runs = self.db.sl("simulation_runs")
        row = await self.db.fetchone(
            f"SELECT s.last_id, s.last_run_id, s.columns_hash,"
            f" (SELECT MAX(r.id) FROM {runs} r) AS top,"
            f" (SELECT a.run_id FROM {runs} a WHERE a.id = s.last_id) AS anchor,"
            " (SELECT COUNT(*) FROM config_index_holes) AS holes"
            " FROM config_index_state s WHERE s.name = %s",
            (STATE_NAME,),
            doing="checking the config index",
        )
        if row is None:
            return False
        return (
            row["columns_hash"] == self._columns_hash
            and int(row["top"] or 0) == int(row["last_id"])
            and row["anchor"] == row["last_run_id"]
            and int(row["holes"]) == 0
        )

    async def position(self) -> int:
        """SnakeLab's highest run id indexed so far (0 before the first refresh)."""
        row = await self.db.fetchone(
            "SELECT last_id FROM config_index_state WHERE name = %s",
            (STATE_NAME,),
            doing="reading the config index position",
        )
        return int(row["last_id"]) if row else 0

    async def _ensure_state_row(self) -> None:
        # Its own transaction: two refreshers that both find no row and insert it inside
        # their locking transactions deadlock on the gap lock.
        if self._state_ready:
            return
        async with self.db.transaction("creating the config index state") as cur:
            await cur.execute(
                "INSERT INTO config_index_state (name, last_id, last_run_id, columns_hash)"
                " VALUES (%s, 0, NULL, %s) ON DUPLICATE KEY UPDATE name = name",
                (STATE_NAME, self._columns_hash),
            )
        self._state_ready = True

    async def _lock_state(self, cur: Any) -> dict[str, Any] | None:
        await cur.execute(
            "SELECT last_id, last_run_id, columns_hash FROM config_index_state"
            " WHERE name = %s FOR UPDATE",
            (STATE_NAME,),
        )
        row = await cur.fetchone()
        return dict(row) if row else None

    async def _wipe(self, cur: Any, why: str) -> None:
        logger.warning("config index: rebuilding from SnakeLab's tables (%s)", why)
        for table in ("config_index_runs", "config_index_contexts", "config_index_holes"):
            await cur.execute(f"DELETE FROM {table}")
        await cur.execute(
            "UPDATE config_index_state SET last_id = 0, last_run_id = NULL, columns_hash = %s"
            " WHERE name = %s",
            (self._columns_hash, STATE_NAME),
        )

    async def _trusted_last_id(self, cur: Any, state: Mapping[str, Any], runs: str) -> int:
        """The last indexed id, or 0 after wiping an index that no longer matches SnakeLab's
        tables (other columns, or the last indexed run changed or vanished)."""
        last_id = int(state["last_id"])
        if state["columns_hash"] != self._columns_hash:
            await self._wipe(cur, "the schema's columns changed")
            return 0
        if last_id > 0:
            await cur.execute(f"SELECT run_id FROM {runs} WHERE id = %s", (last_id,))
            anchor = await cur.fetchone()
            if anchor is None or anchor["run_id"] != state["last_run_id"]:
                await self._wipe(cur, f"SnakeLab's run #{last_id} changed or vanished")
                return 0
        return last_id

    async def _refresh_batch(self) -> tuple[int, bool]:
        runs = self.db.sl("simulation_runs")
        configurations = self.db.sl("configurations")
        select = (
            f"SELECT r.id, r.run_id, c.run_id AS config_run_id, {self._select_columns}"
            f" FROM {runs} r LEFT JOIN {configurations} c ON c.run_id = r.run_id"
        )
        await self._ensure_state_row()
        async with self.db.transaction("refreshing the config index") as cur:
            state = await self._lock_state(cur)
            if state is None:  # deleted by hand since this process created it
                self._state_ready = False
                return 0, True
            last_id = await self._trusted_last_id(cur, state, runs)

            await cur.execute("SELECT lo, hi, noticed_at FROM config_index_holes ORDER BY lo")
            holes = [(int(r["lo"]), int(r["hi"]), r["noticed_at"]) for r in await cur.fetchall()]
            hole_rows: list[dict[str, Any]] = []
            if holes:
                where = " OR ".join("r.id BETWEEN %s AND %s" for _ in holes)
                args = [bound for lo, hi, _ in holes for bound in (lo, hi)]
                await cur.execute(f"{select} WHERE {where}", args)
                hole_rows = list(await cur.fetchall())

            await cur.execute(
                f"{select} WHERE r.id > %s ORDER BY r.id LIMIT %s", (last_id, self.batch_size)
            )
            new_rows = list(await cur.fetchall())
            more = len(new_rows) == self.batch_size

            # A run whose configuration row is not visible yet is treated like a hole.
            ready = [r for r in (*hole_rows, *new_rows) if r["config_run_id"] is not None]
            added = await self._insert(cur, ready)

            now = datetime.now(UTC).replace(tzinfo=None)
            found = {int(r["id"]) for r in ready}
            still_open: list[tuple[int, int, datetime]] = []
            for lo, hi, noticed in holes:
                if noticed < now - HOLE_GRACE:
                    continue
                still_open.extend((a, b, noticed) for a, b in _missing_ranges(lo, hi, found))
            if new_rows:
                top = int(new_rows[-1]["id"])
                still_open.extend((a, b, now) for a, b in _missing_ranges(last_id + 1, top, found))
                last_id = top
                last_run_id = new_rows[-1]["run_id"]
            if len(still_open) > MAX_HOLES:
                logger.warning(
                    "config index: %d id gaps in SnakeLab's runs; forgetting the oldest",
                    len(still_open),
                )
                still_open = sorted(still_open, key=lambda h: h[2])[-MAX_HOLES:]
            if holes or still_open:
                await cur.execute("DELETE FROM config_index_holes")
                if still_open:
                    await cur.executemany(
                        "INSERT INTO config_index_holes (lo, hi, noticed_at) VALUES (%s, %s, %s)",
                        sorted(still_open),
                    )
            if new_rows:
                await cur.execute(
                    "UPDATE config_index_state SET last_id = %s, last_run_id = %s WHERE name = %s",
                    (last_id, last_run_id, STATE_NAME),
                )
        return added, more

    async def _insert(self, cur: Any, rows: Sequence[Mapping[str, Any]]) -> int:
        if not rows:
            return 0
        run_rows = []
        context_rows = []
        for row in rows:
            sl_id = int(row["id"])
            try:
                texts = self._texts(row)
            except (TypeError, ValueError) as exc:
                # SnakeLab's columns are NOT NULL numbers; a row that still is not one cannot
                # equal any valid candidate, so leaving it out changes no answer.
                logger.warning("config index: skipping SnakeLab run #%s: %s", sl_id, exc)
                continue
            run_rows.append((sl_id, _key(texts, self._columns)))
            for item in registry.ENTRIES:
                context_rows.append(
                    (self._entry_ids[item.name], _key(texts, self._contexts[item.name]), sl_id)
                )
        # A hole probe may find a run another refresh already indexed; INSERT IGNORE would
        # say so with a warning, the no-op update says nothing.
        await cur.executemany(
            "INSERT INTO config_index_runs (sl_id, config_key) VALUES (%s, %s)"
            " ON DUPLICATE KEY UPDATE sl_id = sl_id",
            run_rows,
        )
        await cur.executemany(
            "INSERT INTO config_index_contexts (entry, context_key, sl_id)"
            " VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE sl_id = sl_id",
            context_rows,
        )
        return len(run_rows)

    # -- lookups ------------------------------------------------------------------------------

    def _stored_rows_sql(self, index_join: str) -> str:
        return (
            f"SELECT r.id, r.run_id, r.status, {self._select_columns} FROM {index_join}"
            f" JOIN {self.db.sl('simulation_runs')} r ON r.id = x.sl_id"
            f" JOIN {self.db.sl('configurations')} c ON c.run_id = r.run_id"
        )

    async def find_indexed(self, config: Mapping[str, Any]) -> list[IndexedRun]:
        """Stored runs canonically equal to ``config`` (all 26 columns), oldest first."""
        await self.refresh()
        wanted = self._texts(config)
        rows = await self.db.fetchall(
            self._stored_rows_sql("config_index_runs x") + " WHERE x.config_key = %s",
            (_key(wanted, self._columns),),
            doing="looking up a configuration",
        )
        return [
            IndexedRun(int(row["id"]), str(row["run_id"]), row["status"])
            for row in sorted(rows, key=lambda r: int(r["id"]))
            if self._equal(row, wanted, self._columns)
        ]

    async def find_runs(self, config: Mapping[str, Any]) -> list[str]:
        """Run ids of stored runs equal to ``config`` (any status or version, seed included)."""
        return [run.run_id for run in await self.find_indexed(config)]

    async def existing_values(
        self, item: registry.Entry, golden_config: Mapping[str, Any]
    ) -> set[tuple[Fraction, ...]]:
        """The entry's distinct values among stored runs whose other columns equal the golden's."""
        await self.refresh()
        wanted = self._texts(golden_config)
        context = self._contexts[item.name]
        rows = await self.db.fetchall(
            self._stored_rows_sql("config_index_contexts x")
            + " WHERE x.entry = %s AND x.context_key = %s",
            (self._entry_ids[item.name], _key(wanted, context)),
            doing=f"reading tested values of {item.name}",
        )
        return {
            tuple(Fraction(self._number_text(row[column])) for column in item.columns)
            for row in rows
            if self._equal(row, wanted, context)
        }

    def _equal(
        self, row: Mapping[str, Any], wanted: Mapping[str, str], columns: Sequence[str]
    ) -> bool:
        # The spec's comparison itself: canonical text per column, equal iff equal numbers.
        try:
            return all(self._number_text(row[column]) == wanted[column] for column in columns)
        except (TypeError, ValueError):
            return False

    async def is_exhausted(self, item: registry.Entry, golden_config: Mapping[str, Any]) -> bool:
        """True iff every legal choice of a finite entry already ran with the golden's other
        settings (any status); always False for continuous domains."""
        choices = registry.domain(self.schema, item)
        if choices is None:
            return False
        existing = await self.existing_values(item, golden_config)
        return set(choices) <= existing


def _missing_ranges(lo: int, hi: int, present: set[int]) -> list[tuple[int, int]]:
    """The maximal runs of ids in [lo, hi] that are not in ``present``."""
    ranges: list[tuple[int, int]] = []
    cursor = lo
    for i in sorted(i for i in present if lo <= i <= hi):
        if i > cursor:
            ranges.append((cursor, i - 1))
        cursor = i + 1
    if cursor <= hi:
        ranges.append((cursor, hi))
    return ranges
