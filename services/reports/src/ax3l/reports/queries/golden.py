"""Golden configurations: each one, its score, the change that produced it and why."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from itertools import zip_longest

from ax3l.reports.models.golden import (
    Change,
    Confirmation,
    ConfirmationRun,
    GoldenEntry,
    GoldenPage,
)
from ax3l.reports.queries.experiment import golden_content, golden_from_row
from ax3l.shared.config_schema import config_changes
from ax3l.shared.db.database import Database
from ax3l.shared.db.report_reads import golden_rows
from ax3l.shared.event_models import GoldenConfig


def confirmation(golden: GoldenConfig) -> Confirmation | None:
    """A confirmed golden's mean and its run per seed; None for a golden without them (the
    single mode). Lists of unequal length (an odd row) pair up as far as each goes."""
    seeds = golden.confirmation_seeds or []
    scores = golden.confirmation_scores or []
    runs = golden.confirmation_runs or []
    mean = golden.mean_high_score
    if mean is None and not (seeds or scores or runs):
        return None
    return Confirmation(
        mean_high_score=mean,
        runs=tuple(
            ConfirmationRun(seed=seed, score=score, run_id=run_id)
            for seed, score, run_id in zip_longest(seeds, scores, runs)
        ),
    )


async def golden_configurations(
    db: Database,
    *,
    limit: int,
    before: int | None = None,
    proposers: Callable[[list[str]], Awaitable[dict[str, str]]] | None = None,
) -> GoldenPage:
    """Golden configurations newest first, and the cursor of the next (older) page.

    ``proposers`` gives each golden run's proposer as ``/runs`` names it
    (``RunsTable.proposers``): a golden event names none unless written with one."""
    # One extra, older row gives the last entry on the page its "before" configuration.
    rows = await golden_rows(db, before, limit + 2)
    entries: list[GoldenEntry] = []
    for position, row in enumerate(rows[: limit + 1]):
        golden = golden_content(row)
        older = rows[position + 1] if position + 1 < len(rows) else None
        changes = (
            None
            if older is None
            else [
                Change(path=path, before=before, after=after)
                for path, (before, after) in config_changes(
                    golden_content(older).config, golden.config
                ).items()
            ]
        )
        entries.append(
            GoldenEntry(
                **dict(golden_from_row(row)),
                proposer=golden.proposer,
                config=golden.config,
                changes=changes,
                confirmation=confirmation(golden),
            )
        )
    more = len(entries) > limit
    entries = entries[:limit]
    if proposers is not None:
        named = await proposers([entry.run_id for entry in entries if entry.run_id])
        entries = [
            entry.model_copy(update={"proposer": entry.proposer or named.get(entry.run_id or "")})
            for entry in entries
        ]
    return GoldenPage(
        configurations=entries, older_before=entries[-1].event_id if more and entries else None
    )
