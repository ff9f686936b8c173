"""The experiment's conclusion in one sentence, for the dashboard: how the golden configuration
did on fresh seeds, not only the high score it was chosen for.

A golden's high score is the best episode of one run on the seed where it beat every other
try: part of it is luck (a seed that places the food kindly). Each seed rotation re-runs the
golden on a fresh seed, and that score is the honest one. Below ``MIN_FRESH_SEEDS`` rotations
nothing is concluded; from there the mean fresh-seed score is set against the untuned defaults'
first run (one run on one seed: the caveat says so).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence

from ax3l.reports.models.highscores import FreshSeed, FreshSeeds, HighscorePoint

MIN_FRESH_SEEDS = 3


def rotations(points: Sequence[HighscorePoint]) -> list[FreshSeed]:
    """Each point whose seed differs from the previous point's: the golden on a fresh seed."""
    return [
        FreshSeed(
            seed=point.seed,
            score=point.score,
            run_id=point.run_id,
            simulations=point.simulations,
            previous_seed=before.seed,
            previous_score=before.score,
            fall=before.score - point.score,
        )
        for before, point in itertools.pairwise(points)
        if point.seed != before.seed
    ]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _scores(values: Sequence[int]) -> str:
    return ", ".join(str(value) for value in values)


def _first(first: HighscorePoint) -> str:
    """Whose score the first golden's is: the defaults', unless an adopted history's best."""
    return "the first golden's" if first.kind == "adopted" else "the untuned defaults'"


def conclusion(
    fresh: Sequence[FreshSeed],
    first: HighscorePoint | None,
    golden: HighscorePoint | None,
) -> str:
    """The sentence (``first``: the defaults' golden, the series' first point; ``golden``: its
    last)."""
    if first is None or golden is None:
        return "Nothing to conclude yet: the experiment has no golden configuration."
    if not fresh:
        against = (
            f", against {_first(first)} {first.score}"
            if golden.event_id != first.event_id and golden.seed == first.seed
            else ""
        )
        return (
            f"The golden configuration scored {golden.score} on seed {golden.seed}, the seed it"
            f" was chosen on{against}; it has not been re-run on a fresh seed yet, so nothing can"
            f" be concluded: part of a high score chosen as the best of many runs is luck."
        )
    count = len(fresh)
    if count < MIN_FRESH_SEEDS:
        return (
            f"On {_plural(count, 'fresh seed')} the golden configuration scored"
            f" {_scores([f.score for f in fresh])} where it had scored"
            f" {_scores([f.previous_score for f in fresh])}; with {_plural(count, 'fresh seed')}"
            f" nothing can be concluded: wait for at least {MIN_FRESH_SEEDS} seed rotations."
        )
    mean = statistics.fmean(f.score for f in fresh)
    fall = statistics.fmean(f.fall for f in fresh)
    verdict = "above" if mean > first.score else "not above"
    change = f"{fall:.1f} below" if fall >= 0 else f"{-fall:.1f} above"
    return (
        f"On {count} fresh seeds the golden configuration scored {mean:.1f} on average,"
        f" {change} its scores on the seeds it was chosen on: {verdict} {_first(first)}"
        f" {first.score} on seed {first.seed} (a single run)."
    )


def fresh_seeds(points: Sequence[HighscorePoint]) -> FreshSeeds:
    """The golden's fresh-seed record over the high-score series, and the conclusion."""
    fresh = rotations(points)
    first = points[0] if points else None
    golden = points[-1] if points else None
    return FreshSeeds(
        rotations=fresh,
        defaults_score=first.score if first else None,
        defaults_seed=first.seed if first else None,
        golden_score=golden.score if golden else None,
        golden_seed=golden.seed if golden else None,
        mean_fresh=statistics.fmean(f.score for f in fresh) if fresh else None,
        mean_fall=statistics.fmean(f.fall for f in fresh) if fresh else None,
        conclusion=conclusion(fresh, first, golden),
    )
