"""Every SnakeLab run as one in-memory table, kept up to date incrementally, with its provenance
from Ax3l's events; filters, sorting and keyset pages over it; CSV and Parquet of a filter.

Why in memory: the proposer and the entry of a run live in Ax3l's database (``run_provenance``,
and the events that make a run golden or tag it), the run itself in SnakeLab's tables, and a
table sorted by any of them pages in milliseconds once both sit in one polars frame. The frame
is small (100,000 runs are about 20 MB) and each request reads only what changed: runs newer
than the newest it holds, the runs it holds that were not finished yet (their state and score
still move), and events (with the provenance rows they made) newer than the newest it read. A
wipe (fewer runs, or another first run; another first event) makes it read everything again.

Who proposed a run, its entry, its golden of its time and its conversation: its
``run_provenance`` row (``ax3l.shared.db.run_provenance``), which the golden pages, the proposers
page and the Optuna export read too.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from ax3l.reports.models.runs import (
    EXPORT_COLUMNS,
    TUNED_COLUMNS,
    RunRow,
    RunsPage,
    RunsPageQuery,
    RunsQuery,
)
from ax3l.shared import run_notes
from ax3l.shared.config_schema import ConfigSchema
from ax3l.shared.db import report_reads
from ax3l.shared.db import run_provenance as provenance
from ax3l.shared.db.database import Database
from ax3l.shared.db.report_reads import PROVENANCE_FIELDS, history_mark
from ax3l.shared.db.snakelab_reads import SEPARATOR, SnakeLabRuns
from ax3l.shared.registry import ENTRIES
from ax3l.shared.wire import TERMINAL_STATES

CHUNK = 20_000  # runs per read of new runs (each statement stays well inside the query timeout)
EVENT_WINDOW = 250_000  # event ids per provenance read
PROVENANCE_EVENTS = (provenance.GOLDEN_EVENT, *run_notes.EVENTS)
DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S%.f"


def _schema(config: ConfigSchema) -> dict[str, pl.DataType]:
    columns: dict[str, pl.DataType] = {
        "id": pl.Int64(),
        "run_id": pl.String(),
        "created_at": pl.Datetime("us"),
        "completed_at": pl.Datetime("us"),
        "seed": pl.Int64(),
        "status": pl.String(),
        "high_score": pl.Int64(),
    }
    for column in TUNED_COLUMNS:
        integer = config.by_column[column].type == "integer"
        columns[column] = pl.Int64() if integer else pl.Float64()
    return columns


PROVENANCE_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "proposer": pl.String(),
    "entry": pl.String(),
    "golden": pl.Boolean(),
    "golden_run_id": pl.String(),
    "conversation": pl.String(),
    "tags": pl.List(pl.String()),
    "notes": pl.List(pl.String()),
}
# What a run is compared with in its golden of its time: the seed and the nine tuned values.
COMPARED_COLUMNS: tuple[str, ...] = ("seed", *TUNED_COLUMNS)
PATHS: dict[str, str] = {
    "seed": "seed",
    **{
        column: path
        for entry in ENTRIES
        for column, path in zip(entry.columns, entry.paths, strict=True)
    },
}
GOLDEN_PREFIX = "golden."  # the golden of its time's values, beside the run's own (``with_golden``)


def _parse(rows: list[dict[str, Any]], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """The ``line`` of each row as a frame of ``schema`` (times parsed)."""
    if not rows:
        return pl.DataFrame(schema=schema)
    times = [name for name, dtype in schema.items() if dtype == pl.Datetime("us")]
    parsed = pl.read_csv(
        io.StringIO("\n".join(str(row["line"]) for row in rows)),
        has_header=False,
        separator=SEPARATOR,
        quote_char=None,
        schema={name: pl.String() if name in times else dtype for name, dtype in schema.items()},
        empty_string_is_null=True,
    )
    return parsed.with_columns(
        pl.col(name).str.to_datetime(DATETIME_FORMAT, time_unit="us") for name in times
    )


@dataclass
class Provenance:
    """Each run's ``run_provenance`` row, the runs that became golden and a person's tags and
    notes, read incrementally: how far it read and of which history."""

    newest: int = 0
    history: tuple[int, datetime] | None = None
    table: bool = False  # the database has run_provenance (one of the user's own tables has not)
    rows: dict[str, list[Any]] = field(default_factory=dict)  # run id -> PROVENANCE_COLUMNS[1:]
    golden: set[str] = field(default_factory=set)
    notes: run_notes.RunNotes = field(default_factory=run_notes.RunNotes)

    def add_row(self, row: dict[str, Any]) -> None:
        if row["name"] in run_notes.EVENTS:
            self.notes.add(row["name"], row)
        elif isinstance(row["run_id"], str) and row["run_id"]:
            self.golden.add(row["run_id"])

    def frame(self) -> pl.DataFrame:
        runs = sorted(set(self.rows) | self.golden | self.notes.runs())
        made = [self.rows.get(run) or [None] * 4 for run in runs]
        return pl.DataFrame(
            {
                "run_id": runs,
                "proposer": [row[0] for row in made],
                "entry": [row[1] for row in made],
                "golden": [run in self.golden for run in runs],
                "golden_run_id": [row[2] for row in made],
                "conversation": [row[3] for row in made],
                "tags": [self.notes.tags_of(run) for run in runs],
                "notes": [self.notes.notes_of(run) for run in runs],
            },
            schema=PROVENANCE_SCHEMA,
        )


def with_golden(runs: pl.DataFrame) -> pl.DataFrame:
    """``runs`` (with their provenance) plus, for each, its golden of its time's high score
    (``golden_high_score``), the difference of the scores (``score_difference``) and that
    golden's seed and tuned values (``golden.<column>``, for ``with_changes``)."""
    golden = runs.select(
        pl.col("run_id").alias("golden_run_id"),
        pl.col("high_score").alias("golden_high_score"),
        *(pl.col(column).alias(GOLDEN_PREFIX + column) for column in COMPARED_COLUMNS),
    )
    joined = runs.join(golden, on="golden_run_id", how="left", maintain_order="left")
    return joined.with_columns(
        (pl.col("high_score") - pl.col("golden_high_score")).alias("score_difference")
    )


def with_changes(runs: pl.DataFrame) -> pl.DataFrame:
    """``runs`` (of ``with_golden``) plus what differs from their golden of its time: the
    columns (``changed``) and, for people, ``path: golden -> run; ...`` (``changes``, in the
    order of ``COMPARED_COLUMNS``). Worked out for the rows a page or a download shows, not for
    the whole table at each refresh."""
    differs = {
        column: pl.col(column).ne_missing(pl.col(GOLDEN_PREFIX + column))
        & pl.col("golden_run_id").is_not_null()
        for column in COMPARED_COLUMNS
    }
    parts = [
        pl.when(differs[column]).then(
            pl.format(
                "{}: {} -> {}",
                pl.lit(PATHS[column]),
                pl.col(GOLDEN_PREFIX + column).cast(pl.String).fill_null("–"),
                pl.col(column).cast(pl.String).fill_null("–"),
            )
        )
        for column in COMPARED_COLUMNS
    ]
    names = [pl.when(differs[column]).then(pl.lit(column)) for column in COMPARED_COLUMNS]
    text = pl.concat_str(parts, separator="; ", ignore_nulls=True)
    return runs.with_columns(
        pl.when(text == "").then(None).otherwise(text).alias("changes"),
        pl.concat_list(names).list.drop_nulls().alias("changed"),
    )


class RunsTable:
    """Every run with its provenance as one polars frame (``frame``), refreshed per request.

    The report server reads it once in the background at startup (``reports/warming.py``); a
    request meanwhile waits on the lock for that same read, then reads only what changed."""

    def __init__(self) -> None:
        self.full_reads = 0  # whole-table reads: one after a start, one more after each wipe
        self._schema: dict[str, pl.DataType] = {}
        self._runs = pl.DataFrame()
        self._first: str | None = None  # the first run's id: another one means another history
        self._newest = 0
        self._pending: list[int] = []
        self._provenance = Provenance()
        self._frame: pl.DataFrame | None = None
        self._lock = asyncio.Lock()

    async def frame(self, db: Database, schema: ConfigSchema) -> pl.DataFrame:
        """The whole table, every run SnakeLab holds now, in submission order (``schema``
        types the tuned columns)."""
        async with self._lock:
            if not self._schema:
                self._schema = _schema(schema)
                self._reset()
            runs_changed = await self._refresh_runs(db)
            events_changed = await self._refresh_provenance(db)
            if self._frame is None or runs_changed or events_changed:
                self._frame = with_golden(
                    self._runs.join(self._provenance.frame(), on="run_id", how="left")
                    .with_columns(
                        pl.col("golden").fill_null(False),
                        pl.col("tags").fill_null([]),
                        pl.col("notes").fill_null([]),
                    )
                    .sort("id")
                )
            return self._frame

    async def annotations(
        self, db: Database, schema: ConfigSchema, run_ids: list[str]
    ) -> dict[str, tuple[list[str], list[str]]]:
        """The tags and notes of each of ``run_ids`` that has some (``ax3l.shared.run_notes``)."""
        frame = await self.frame(db, schema)
        if not run_ids or frame.is_empty():
            return {}
        picked = frame.filter(
            pl.col("run_id").is_in(run_ids)
            & ((pl.col("tags").list.len() > 0) | (pl.col("notes").list.len() > 0))
        )
        return {
            row["run_id"]: (row["tags"], row["notes"])
            for row in picked.select("run_id", "tags", "notes").to_dicts()
        }

    async def proposers(
        self, db: Database, schema: ConfigSchema, run_ids: list[str]
    ) -> dict[str, str]:
        """The proposer of each of ``run_ids`` that has one, as ``/runs`` shows it."""
        frame = await self.frame(db, schema)
        if not run_ids or frame.is_empty():
            return {}
        picked = frame.filter(pl.col("run_id").is_in(run_ids) & pl.col("proposer").is_not_null())
        return dict(zip(picked["run_id"].to_list(), picked["proposer"].to_list(), strict=True))

    # -- SnakeLab's runs ---------------------------------------------------------------------

    def _rows(self, rows: list[dict[str, Any]]) -> pl.DataFrame:
        return _parse(rows, self._schema)

    async def _read_everything(self, db: Database) -> pl.DataFrame:
        """Both tables scanned in key order and joined here: at 100,000 runs several times
        faster than 100,000 lookups of a run's configuration by its id."""
        run_columns = ("id", "run_id", "created_at", "completed_at", "status", "high_score")
        config_columns = ("run_id", "seed", *TUNED_COLUMNS)
        frames = []
        for columns, configurations in ((run_columns, False), (config_columns, True)):
            blocks = await SnakeLabRuns(db).every_line(columns, configurations)
            schema = {name: self._schema[name] for name in columns}
            frames.append(_parse([{"line": block} for block in blocks], schema))
        return frames[0].join(frames[1], on="run_id", how="left").select(list(self._schema))

    async def _refresh_runs(self, db: Database, retry: bool = True) -> bool:
        count, first_run = await SnakeLabRuns(db).mark()
        changed = False
        if self._first is not None and first_run != self._first:
            self._reset()  # another history: the table was emptied or recreated
            changed = True
        if self._pending:
            rows = await SnakeLabRuns(db).lines(list(self._schema), ids=self._pending)
            fresh = self._rows(rows)
            held = self._runs.filter(pl.col("id").is_in(self._pending)).sort("id")
            if not fresh.equals(held):  # a state or score moved (a running run's, mostly)
                self._runs = pl.concat(
                    [self._runs.filter(~pl.col("id").is_in(self._pending)), fresh]
                )
                changed = True
        if self._newest == 0 and count:
            self._runs = await self._read_everything(db)
            self.full_reads += 1
            if self._runs.height:
                self._newest = int(self._runs["id"].max())  # type: ignore[arg-type]
            changed = True
        while True:
            rows = await SnakeLabRuns(db).lines(list(self._schema), after=self._newest, limit=CHUNK)
            if rows:
                self._runs = pl.concat([self._runs, self._rows(rows)])
                self._newest = int(rows[-1]["id"])
                changed = True
            if len(rows) < CHUNK:
                break
        if self._runs.height != count and retry:
            # Rows went away (a partial wipe) or came in meanwhile: read everything again.
            self._reset()
            return await self._refresh_runs(db, retry=False)
        if changed:
            self._runs = self._runs.sort("id")
            unfinished = ~pl.col("status").is_in(sorted(TERMINAL_STATES))
            self._pending = self._runs.filter(unfinished)["id"].to_list()
            self._first = str(self._runs["run_id"][0]) if self._runs.height else None
        return changed

    def _reset(self) -> None:
        self._runs = pl.DataFrame(schema=self._schema)
        self._first = None
        self._newest = 0
        self._pending = []

    # -- provenance from the events ----------------------------------------------------------

    async def _refresh_provenance(self, db: Database) -> bool:
        history, newest = await history_mark(db)
        changed = False
        if history != self._provenance.history or newest < self._provenance.newest:
            self._provenance = Provenance(history=history)
            changed = True
        if not self._provenance.table and await provenance.table_present(db):
            # Created (and back-filled) since: read the history again with it.
            self._provenance = Provenance(history=history, table=True)
            changed = True
        while self._provenance.newest < newest:
            start = self._provenance.newest
            end = min(newest, start + EVENT_WINDOW)
            blocks = await report_reads.provenance_event_blocks(db, PROVENANCE_EVENTS, start, end)
            keys = ("event_id", "name", "process_id", *PROVENANCE_FIELDS)
            for block in blocks:
                for values in json.loads(f"[{block}]"):
                    self._provenance.add_row(dict(zip(keys, values, strict=True)))
            table = self._provenance.table
            made = await report_reads.provenance_row_blocks(db, start, end) if table else []
            for block in made:
                for run_id, *values in json.loads(f"[{block}]"):
                    self._provenance.rows[run_id] = values
            self._provenance.newest = end
            changed = changed or bool(blocks) or bool(made)
        return changed


# -- filters, sorting and keyset pages ---------------------------------------------------------


class BadCursor(ValueError):
    """A cursor that is not one of this table's, or of another sort order."""


def matching(frame: pl.DataFrame, query: RunsQuery) -> pl.DataFrame:
    """The runs the query's filters keep (all of them without filters)."""
    equal = {
        "status": query.status,
        "seed": query.seed,
        "entry": query.entry,
        "proposer": query.proposer,
        "golden": query.golden,
    }
    conditions = [pl.col(column) == value for column, value in equal.items() if value is not None]
    if query.tag is not None:
        conditions.append(pl.col("tags").list.contains(query.tag))
    for column, low, high in query.ranges():
        if low is not None:
            conditions.append(pl.col(column) >= low)
        if high is not None:
            conditions.append(pl.col(column) <= high)
    return frame.filter(*conditions) if conditions else frame


def ordered(frame: pl.DataFrame, sort: str, order: str) -> pl.DataFrame:
    """Sorted by ``sort`` (empty values last either way), ties by run number the same way."""
    descending = order == "desc"
    return frame.sort(
        [pl.col(sort).is_null(), pl.col(sort), pl.col("id")],
        descending=[False, descending, descending],
    )


def encode_cursor(query: RunsQuery, row: dict[str, Any]) -> str:
    """The keyset position of ``row`` in the query's order, as an opaque URL-safe string."""
    value = row[query.sort]
    if isinstance(value, datetime):
        value = value.isoformat()
    text = json.dumps([query.sort, query.order, value, row["id"]], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(query: RunsQuery, cursor: str, dtype: pl.DataType) -> tuple[Any, int]:
    """``(value, id)`` of a cursor made for the query's sort order."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        sort, order, value, run = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise BadCursor("the cursor is not one this table made") from None
    if (sort, order) != (query.sort, query.order):
        raise BadCursor(f"the cursor belongs to sort={sort} order={order}; reload the first page")
    if not isinstance(run, int) or isinstance(run, bool):
        raise BadCursor("the cursor is not one this table made")
    try:
        if value is not None:
            if dtype == pl.Datetime("us"):
                value = datetime.fromisoformat(value)
            elif dtype == pl.Int64():
                value = int(value)
            elif dtype == pl.Float64():
                value = float(value)
            elif dtype == pl.Boolean():
                value = bool(value)
            else:
                value = str(value)
    except (TypeError, ValueError):
        raise BadCursor("the cursor is not one this table made") from None
    return value, run


def _beyond(sort: str, descending: bool, value: Any, run: int) -> pl.Expr:
    """Rows after ``(value, run)`` in the order ``ordered`` sorts them."""
    column, number = pl.col(sort), pl.col("id")
    later_id: pl.Expr = number < run if descending else number > run
    if value is None:
        return column.is_null() & later_id
    later: pl.Expr = column < value if descending else column > value
    same: pl.Expr = column == value
    return column.is_null() | later | (same & later_id)


def rows(runs: pl.DataFrame) -> list[RunRow]:
    """A few runs of the table (a page's, the dashboard's) as records, with their changes."""
    return [RunRow.model_validate(row) for row in with_changes(runs).to_dicts()]


def page(frame: pl.DataFrame, query: RunsPageQuery) -> RunsPage:
    """One page of the matching runs in the query's order, from its cursor."""
    found = ordered(matching(frame, query), query.sort, query.order)
    descending = query.order == "desc"
    limit = query.limit
    if query.after is not None:
        value, run = decode_cursor(query, query.after, frame.schema[query.sort])
        start = found.height - found.filter(_beyond(query.sort, descending, value, run)).height
        end = min(found.height, start + limit)
    elif query.before is not None:
        value, run = decode_cursor(query, query.before, frame.schema[query.sort])
        position = found.filter(
            ~_beyond(query.sort, descending, value, run) & (pl.col("id") != run)
        ).height
        end = position
        start = max(0, end - limit)
    else:
        start, end = 0, min(found.height, limit)
    shown = found.slice(start, end - start)
    edges = shown.select(sorted({"id", query.sort})).to_dicts()
    return RunsPage(
        runs=rows(shown),
        matching=found.height,
        total=frame.height,
        next_after=encode_cursor(query, edges[-1]) if edges and end < found.height else None,
        previous_before=encode_cursor(query, edges[0]) if edges and start > 0 else None,
    )


def _export(frame: pl.DataFrame, query: RunsQuery) -> pl.DataFrame:
    found = ordered(matching(frame, query), query.sort, query.order)
    return with_changes(found).select(EXPORT_COLUMNS)


def export_csv(frame: pl.DataFrame, query: RunsQuery) -> bytes:
    """The matching runs in the query's order as CSV (UTF-8, a header row, ISO times; a run's
    tags joined by ``,``, its notes by a blank line)."""
    found = _export(frame, query).with_columns(
        pl.col("tags").list.join(","), pl.col("notes").list.join("\n\n")
    )
    return found.write_csv().encode("utf-8")


def export_parquet(frame: pl.DataFrame, query: RunsQuery) -> bytes:
    """The matching runs in the query's order as Parquet (zstd)."""
    found = _export(frame, query)
    buffer = io.BytesIO()
    found.write_parquet(buffer, compression="zstd")
    return buffer.getvalue()


def differing(runs: list[RunRow]) -> list[str]:
    """The columns (seed, the nine tuned values, in that order) whose values differ among
    ``runs``."""
    return [
        column for column in COMPARED_COLUMNS if len({getattr(run, column) for run in runs}) > 1
    ]


def chosen(frame: pl.DataFrame, run_ids: list[str]) -> tuple[list[RunRow], list[str]]:
    """The rows of ``run_ids`` in that order, and the ids the table does not hold."""
    picked = frame.filter(pl.col("run_id").is_in(run_ids)) if frame.height else frame
    found = {row.run_id: row for row in rows(picked)} if picked.height else {}
    return [found[r] for r in run_ids if r in found], [r for r in run_ids if r not in found]
