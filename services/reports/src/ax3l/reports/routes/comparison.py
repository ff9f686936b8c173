"""``/comparison``: ``ax3l-compare``'s repeated experiments, per proposer, with the uncertainty.

It leads with the held-out verdict (each repeat's recommendation re-tested on held-out seeds):
per proposer the IQM of the repeats' held-out means with its bootstrap interval, the best
observed and the optimism gap, and the paired differences against ``default`` and ``tpe`` with
their intervals (a table and a plot); with ``--retest-at``, the held-out IQM against runs spent.
A comparison from before the re-tests shows only what follows, marked as such. Then, per
proposer: the median best-so-far against SnakeLab's run count inside a 95% band over the
repeats, P(beats random) at the budget, the median runs needed to reach a score the user
picks (``target``), wasted turns per accepted proposal (in all, on finite and on continuous
entries) and, for ``llm+tpe``, the model's proposals and how many matched a TPE suggestion.
The reply's records are the query's own (``models/comparison.py``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import HTMLResponse

from ax3l.reports.deps import DatabaseDep, PageDep
from ax3l.reports.figures import comparison_figure, paired_figure, retest_curve_figure
from ax3l.reports.models.comparison import ComparisonOut, ComparisonPageQuery, ComparisonQuery
from ax3l.reports.queries.comparison import (
    default_target,
    has_retests,
    list_comparisons,
    read_repeats,
    read_retests,
    retest_per_repeat,
    retest_seeds,
    summarise,
    verdict,
    with_verdicts,
)
from ax3l.shared.comparison_conclusion import conclusion

router = APIRouter(prefix="/api/comparison", tags=["comparison"])
pages = APIRouter(tags=["pages"])


@router.get("", response_model=ComparisonOut)
async def get_comparison(
    query: Annotated[ComparisonQuery, Query()], db: DatabaseDep
) -> ComparisonOut:
    """A comparison (`comparison`, default the latest) of `ax3l-compare`. First the held-out
    verdict (`has_retests`; false for a comparison from before the re-tests): `verdict`, per
    proposer the IQM of its repeats' held-out means with its 95% bootstrap interval, their mean
    and median, the best observed, the optimism gap and (surrogate only) the expected score;
    `pairs`, the median paired difference of held-out means against `default` and `tpe` with
    its interval and P(A beats B); `retests`, every re-test row. Then per proposer the
    median best-so-far curve with its 95% band over repeats, the median best at the budget,
    P(beats random), the median runs to reach `target`, wasted turns per accepted proposal (in
    all, on finite and on continuous entries) and, for `llm+tpe`, the model's accepted
    proposals and how many matched a TPE suggestion; every repeat with its curve. Without any
    comparison, `comparison` is null."""
    found = await list_comparisons(db)
    ids = [c.comparison_id for c in found]
    if not found:
        return ComparisonOut(comparison=None, comparisons=[], target=None, proposers=[], repeats=[])
    if query.comparison is None:
        chosen = found[0]
    else:
        matching = [c for c in found if c.comparison_id == query.comparison]
        if not matching:
            raise HTTPException(404, f"there is no comparison {query.comparison}")
        chosen = matching[0]
    retests = await read_retests(db, chosen.comparison_id)
    repeats = with_verdicts(chosen, await read_repeats(db, chosen.comparison_id), retests)
    target = query.target if query.target is not None else default_target(chosen, repeats)
    summaries = summarise(chosen, repeats, target, retests)
    table, pairs = verdict(chosen, repeats)
    return ComparisonOut(
        comparison=chosen,
        comparisons=ids,
        target=target,
        has_retests=has_retests(chosen) and bool(retests),
        retest_seeds=retest_seeds(chosen),
        retest_per_repeat=retest_per_repeat(chosen),
        verdict=table,
        pairs=pairs,
        proposers=summaries,
        repeats=repeats,
        retests=retests,
    )


@pages.get("/comparison", response_class=HTMLResponse, summary="Proposer comparison page")
async def comparison_page(
    query: Annotated[ComparisonPageQuery, Query()], db: DatabaseDep, page: PageDep
) -> HTMLResponse:
    """Repeated experiments per proposer: curves with their band, and the table; ``refresh``
    updates them in place every so many seconds (a comparison under way)."""
    found = await get_comparison(query, db)
    figure = pairs_plot = curves_plot = None
    if found.comparison is not None:
        figure = comparison_figure(
            [(p.proposer, p.curve) for p in found.proposers if p.curve],
            found.comparison.budget,
            found.target,
        )
        if found.pairs:
            pairs_plot = paired_figure(found.pairs)
        curves = [(p.proposer, p.retest_curve) for p in found.proposers if p.retest_curve]
        if any(len(points) > 1 for _, points in curves):
            curves_plot = retest_curve_figure(curves, found.comparison.budget)
    return page.render(
        "comparison.html",
        {
            "found": found,
            "figure": figure,
            "pairs_plot": pairs_plot,
            "curves_plot": curves_plot,
            "conclusion": conclusion(found.pairs) if found.has_retests else None,
            "query": query,
            "refresh": query.refresh or 0,  # not the live experiment: off unless chosen
        },
    )
